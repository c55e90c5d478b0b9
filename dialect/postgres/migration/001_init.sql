-- Hot rows (partitions, processor, vacuum_counter) are updated on every batch:
-- a low fillfactor leaves room for HOT updates.
CREATE TABLE IF NOT EXISTS {{.Partitions}} (
    id BIGSERIAL PRIMARY KEY,
    queue VARCHAR(64) NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Body}} (
    id BYTEA PRIMARY KEY,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
-- seqbox:split
-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (DESIGN.md section 3).
CREATE TABLE IF NOT EXISTS {{.Incoming}} (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BYTEA NOT NULL
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.Incoming}}_partition_id ON {{.Incoming}} (partition_id, id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Outgoing}} (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BYTEA NOT NULL,
    sequenced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, seq)
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.Outgoing}}_body_id ON {{.Outgoing}} (body_id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Processor}} (
    partition_id BIGINT PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMPTZ NULL,
    locked_by VARCHAR(128) NULL,
    locked_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.VacuumCounter}} (
    partition_id BIGINT PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.DeadLetters}} (
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
CREATE INDEX IF NOT EXISTS {{.DeadLetters}}_status_deadline ON {{.DeadLetters}} (status, deadline)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.DeadLetters}}_status_failed_at ON {{.DeadLetters}} (status, failed_at)
