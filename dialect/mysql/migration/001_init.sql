-- Indexes are declared inside CREATE TABLE: MySQL 8 has no CREATE INDEX IF NOT EXISTS,
-- and DDL is not transactional, so every statement must be safe to re-run.
-- Timestamps are DATETIME(6) in UTC, always written as UTC_TIMESTAMP(6).
CREATE TABLE IF NOT EXISTS {partitions} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue VARCHAR(64) CHARACTER SET ascii NOT NULL,
    partition_no INT NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE KEY {partitions}_queue (queue, partition_no)
) ENGINE=InnoDB
-- seqbox:split
CREATE TABLE IF NOT EXISTS {body} (
    id BINARY(16) NOT NULL PRIMARY KEY,
    payload_type VARCHAR(255) CHARACTER SET ascii NOT NULL,
    payload MEDIUMBLOB NOT NULL,
    headers MEDIUMTEXT NULL,
    created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB
-- seqbox:split
-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (docs/ARCHITECTURE.md, "Tables and locks").
CREATE TABLE IF NOT EXISTS {incoming} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BINARY(16) NOT NULL,
    KEY {incoming}_partition_id (partition_id, id)
) ENGINE=InnoDB
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing} (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BINARY(16) NOT NULL,
    sequenced_at DATETIME(6) NOT NULL,
    PRIMARY KEY (partition_id, seq),
    KEY {outgoing}_body_id (body_id)
) ENGINE=InnoDB
-- seqbox:split
CREATE TABLE IF NOT EXISTS {processor} (
    partition_id BIGINT NOT NULL PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INT NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at DATETIME(6) NULL,
    locked_by VARCHAR(128) CHARACTER SET ascii NULL,
    locked_until DATETIME(6) NULL
) ENGINE=InnoDB
-- seqbox:split
CREATE TABLE IF NOT EXISTS {vacuum_counter} (
    partition_id BIGINT NOT NULL PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB
-- seqbox:split
CREATE TABLE IF NOT EXISTS {dead_letters} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    message_id BINARY(16) NOT NULL,
    payload_type VARCHAR(255) CHARACTER SET ascii NOT NULL,
    payload MEDIUMBLOB NOT NULL,
    headers MEDIUMTEXT NULL,
    created_at DATETIME(6) NOT NULL,
    failed_at DATETIME(6) NOT NULL,
    last_error TEXT NULL,
    attempts INT NOT NULL DEFAULT 0,
    status VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'pending',
    completed_at DATETIME(6) NULL,
    deadline DATETIME(6) NULL,
    KEY {dead_letters}_status_deadline (status, deadline),
    KEY {dead_letters}_status_failed_at (status, failed_at)
) ENGINE=InnoDB
