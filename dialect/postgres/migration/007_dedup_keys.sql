-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message. The primary key is what two
-- producers racing on one key wait on; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS {dedup_keys} (
    queue VARCHAR(64) NOT NULL,
    dedup_key BYTEA NOT NULL,
    message_id BYTEA NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (queue, dedup_key)
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dedup_keys}_expires_at ON {dedup_keys} (expires_at)
-- seqbox:split
ALTER TABLE {dedup_keys} SET (vacuum_truncate = off)
