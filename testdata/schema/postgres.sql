CREATE TABLE IF NOT EXISTS seqbox_schema_version (
    version INTEGER NOT NULL PRIMARY KEY
);

-- Hot rows (partitions, processor, vacuum_counter) are updated on every batch:
-- a low fillfactor leaves room for HOT updates.
CREATE TABLE IF NOT EXISTS seqbox_partitions (
    id BIGSERIAL PRIMARY KEY,
    queue VARCHAR(64) NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_body (
    id BYTEA PRIMARY KEY,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (DESIGN.md section 3).
CREATE TABLE IF NOT EXISTS seqbox_incoming (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BYTEA NOT NULL
);

CREATE INDEX IF NOT EXISTS seqbox_incoming_partition_id ON seqbox_incoming (partition_id, id);

CREATE TABLE IF NOT EXISTS seqbox_outgoing (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BYTEA NOT NULL,
    sequenced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, seq)
);

CREATE INDEX IF NOT EXISTS seqbox_outgoing_body_id ON seqbox_outgoing (body_id);

CREATE TABLE IF NOT EXISTS seqbox_processor (
    partition_id BIGINT PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMPTZ NULL,
    locked_by VARCHAR(128) NULL,
    locked_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_vacuum_counter (
    partition_id BIGINT PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_dead_letters (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    message_id BYTEA NOT NULL,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error TEXT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    status VARCHAR(16) NOT NULL DEFAULT 'pending',
    completed_at TIMESTAMPTZ NULL,
    deadline TIMESTAMPTZ NULL
);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_deadline ON seqbox_dead_letters (status, deadline);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_failed_at ON seqbox_dead_letters (status, failed_at);
