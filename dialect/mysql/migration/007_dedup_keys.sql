-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message. The primary key is what two
-- producers racing on one key wait on; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS {dedup_keys} (
    queue VARCHAR(64) CHARACTER SET ascii NOT NULL,
    dedup_key VARBINARY(255) NOT NULL,
    message_id BINARY(16) NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    PRIMARY KEY (queue, dedup_key),
    KEY {dedup_keys}_expires_at (expires_at)
) ENGINE=InnoDB
