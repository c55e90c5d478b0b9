-- Hot rows (partitions, processor, vacuum_counter) are updated on every batch:
-- a low fillfactor leaves room for HOT updates.
CREATE TABLE IF NOT EXISTS {partitions} (
    id BIGSERIAL PRIMARY KEY,
    queue VARCHAR(64) NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {body} (
    id BYTEA PRIMARY KEY,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
-- seqbox:split
-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (docs/ARCHITECTURE.md, "Tables and locks").
CREATE TABLE IF NOT EXISTS {incoming} (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BYTEA NOT NULL
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {incoming}_partition_id ON {incoming} (partition_id, id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing} (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BYTEA NOT NULL,
    sequenced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, seq)
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {outgoing}_body_id ON {outgoing} (body_id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {processor} (
    partition_id BIGINT PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMPTZ NULL,
    locked_by VARCHAR(128) NULL,
    locked_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {vacuum_counter} (
    partition_id BIGINT PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {dead_letters} (
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
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dead_letters}_status_deadline ON {dead_letters} (status, deadline)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dead_letters}_status_failed_at ON {dead_letters} (status, failed_at)
