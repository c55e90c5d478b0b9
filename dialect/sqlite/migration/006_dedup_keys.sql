-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS {dedup_keys} (
    queue TEXT NOT NULL,
    dedup_key BLOB NOT NULL,
    message_id BLOB NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    PRIMARY KEY (queue, dedup_key)
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dedup_keys}_expires_at ON {dedup_keys} (expires_at)
