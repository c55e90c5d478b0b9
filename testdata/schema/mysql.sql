CREATE TABLE IF NOT EXISTS seqbox_schema_version (
    version INTEGER NOT NULL PRIMARY KEY
);

-- Indexes are declared inside CREATE TABLE: MySQL 8 has no CREATE INDEX IF NOT EXISTS,
-- and DDL is not transactional, so every statement must be safe to re-run.
-- Timestamps are DATETIME(6) in UTC, always written as UTC_TIMESTAMP(6).
CREATE TABLE IF NOT EXISTS seqbox_partitions (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue VARCHAR(64) CHARACTER SET ascii NOT NULL,
    partition_no INT NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE KEY seqbox_partitions_queue (queue, partition_no)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS seqbox_body (
    id BINARY(16) NOT NULL PRIMARY KEY,
    payload_type VARCHAR(255) CHARACTER SET ascii NOT NULL,
    payload MEDIUMBLOB NOT NULL,
    headers MEDIUMTEXT NULL,
    created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (docs/ARCHITECTURE.md, "Tables and locks").
CREATE TABLE IF NOT EXISTS seqbox_incoming (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BINARY(16) NOT NULL,
    KEY seqbox_incoming_partition_id (partition_id, id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS seqbox_outgoing (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BINARY(16) NOT NULL,
    sequenced_at DATETIME(6) NOT NULL,
    PRIMARY KEY (partition_id, seq),
    KEY seqbox_outgoing_body_id (body_id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS seqbox_processor (
    partition_id BIGINT NOT NULL PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INT NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at DATETIME(6) NULL,
    locked_by VARCHAR(128) CHARACTER SET ascii NULL,
    locked_until DATETIME(6) NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS seqbox_vacuum_counter (
    partition_id BIGINT NOT NULL PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS seqbox_dead_letters (
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
    KEY seqbox_dead_letters_status_deadline (status, deadline),
    KEY seqbox_dead_letters_status_failed_at (status, failed_at)
) ENGINE=InnoDB;

-- Text that comes from outside (headers, error text) is stored as utf8mb4
-- whatever the database's default character set: under a latin1 default a
-- strict server refuses characters outside latin1, and a lenient one turns
-- them into '?', altering what is delivered. Re-running is a no-op.
ALTER TABLE seqbox_body MODIFY headers MEDIUMTEXT CHARACTER SET utf8mb4 NULL;

ALTER TABLE seqbox_processor MODIFY last_error TEXT CHARACTER SET utf8mb4 NULL;

ALTER TABLE seqbox_dead_letters MODIFY headers MEDIUMTEXT CHARACTER SET utf8mb4 NULL,
    MODIFY last_error TEXT CHARACTER SET utf8mb4 NULL;

-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there and acks no longer touch this row; the
-- counter column is no longer used (docs/ARCHITECTURE.md, "Vacuum").
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has): the column is added
-- through a statement chosen from information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_vacuum_counter' AND column_name = 'pruned_seq') = 0,
    'ALTER TABLE seqbox_vacuum_counter ADD COLUMN pruned_seq BIGINT NOT NULL DEFAULT 0', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

UPDATE seqbox_vacuum_counter v SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM seqbox_outgoing o WHERE o.partition_id = v.partition_id),
    (SELECT p.processed_seq FROM seqbox_processor p WHERE p.partition_id = v.partition_id), 0)
WHERE pruned_seq = 0;

-- Dead letters an operator acts on (docs/ARCHITECTURE.md, "Dead letters"):
-- note is the operator's note (resolve) or reason (discard); replay_id is
-- the id of the copy a replay enqueued, found again when that copy is acked.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_dead_letters' AND column_name = 'replay_id') = 0,
    'ALTER TABLE seqbox_dead_letters ADD COLUMN note TEXT CHARACTER SET utf8mb4 NULL, ADD COLUMN replay_id BINARY(16) NULL, ADD KEY seqbox_dead_letters_replay_id (replay_id), ADD KEY seqbox_dead_letters_partition (partition_id, id)',
    'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- A queue with the Park failure policy stops a partition at a head that
-- exhausted its attempts: parked_at marks it, and no process leases it
-- until an operator resumes or skips it (docs/ARCHITECTURE.md, "Failure
-- policy: dead-letter or park").
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_processor' AND column_name = 'parked_at') = 0,
    'ALTER TABLE seqbox_processor ADD COLUMN parked_at DATETIME(6) NULL', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- A message's Key is stored with it and handed to handlers (Delivery.Key),
-- so a relay can use it as a broker's partition or routing key; a dead
-- letter keeps it and its replay carries it. Bytes, as Go strings are.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: each statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_body' AND column_name = 'msg_key') = 0,
    'ALTER TABLE seqbox_body ADD COLUMN msg_key BLOB NULL', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_dead_letters' AND column_name = 'msg_key') = 0,
    'ALTER TABLE seqbox_dead_letters ADD COLUMN msg_key BLOB NULL', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message. The primary key is what two
-- producers racing on one key wait on; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS seqbox_dedup_keys (
    queue VARCHAR(64) CHARACTER SET ascii NOT NULL,
    dedup_key VARBINARY(255) NOT NULL,
    message_id BINARY(16) NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    PRIMARY KEY (queue, dedup_key),
    KEY seqbox_dedup_keys_expires_at (expires_at)
) ENGINE=InnoDB;

-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler. Chosen from
-- information_schema, so a re-run is a no-op (MySQL 8 has no ADD COLUMN IF
-- NOT EXISTS); an instant column add on MySQL 8 and MariaDB.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_outgoing' AND column_name = 'purged') = 0,
    'ALTER TABLE seqbox_outgoing ADD COLUMN purged TINYINT NOT NULL DEFAULT 0', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_processor' AND column_name = 'lease_limit') = 0,
    'ALTER TABLE seqbox_processor ADD COLUMN lease_limit INT NULL', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- Purges that made tombstones in the partition (read back by PostgreSQL's
-- one-statement leases; kept on every database so the purge is one SQL).
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_processor' AND column_name = 'purges') = 0,
    'ALTER TABLE seqbox_processor ADD COLUMN purges BIGINT NOT NULL DEFAULT 0', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- A dead letter is found by its message id (DeadLetters.Get, `seqbox dlq
-- show`, the web UI's links by message id): by index, not by a scan.
-- MySQL 8 has no CREATE INDEX IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_dead_letters' AND index_name = 'seqbox_dead_letters_message_id') = 0,
    'ALTER TABLE seqbox_dead_letters ADD KEY seqbox_dead_letters_message_id (message_id)',
    'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- The last seq handed out is the top of outgoing (docs/ARCHITECTURE.md,
-- "Tables and locks"); partitions.sequence is no longer kept. Dropping it
-- makes a process of an earlier release, which would still number from it
-- and could hand out pruned seqs again, fail loudly instead.
-- MySQL 8 has no DROP COLUMN IF EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_partitions' AND column_name = 'sequence') = 1,
    'ALTER TABLE seqbox_partitions DROP COLUMN sequence',
    'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become three generations of separate tables,
-- seqbox_body_g0, seqbox_body_g1, seqbox_body_g2 and seqbox_outgoing_g0, … seqbox_outgoing_g2; every statement names the ones
-- it reads. Not one partitioned table: truncating a partition is DDL on
-- the whole table, whose metadata lock waits for every open transaction
-- that touched any partition (a producer's), and every statement on the
-- table queues behind it (docs/ROTATION.md, "MariaDB").
--
-- The existing tables become generation 0 by a RENAME, which is metadata
-- only: rows and indexes stay. Keys stay per table, (id) and
-- (partition_id, seq): a seq is unique across generations because moves
-- allocate under the partition lock and read the top of all three after
-- it. MySQL's DDL is not transactional, so each statement is safe to run
-- again: the RENAME is chosen from information_schema (a base table
-- named seqbox_body is still there), the rest are IF NOT EXISTS or OR REPLACE.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_body' AND table_type = 'BASE TABLE') = 1,
    'RENAME TABLE seqbox_body TO seqbox_body_g0, seqbox_outgoing TO seqbox_outgoing_g0', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

CREATE TABLE IF NOT EXISTS seqbox_body_g1 LIKE seqbox_body_g0;

CREATE TABLE IF NOT EXISTS seqbox_body_g2 LIKE seqbox_body_g0;

CREATE TABLE IF NOT EXISTS seqbox_outgoing_g1 LIKE seqbox_outgoing_g0;

CREATE TABLE IF NOT EXISTS seqbox_outgoing_g2 LIKE seqbox_outgoing_g0;

-- seqbox_body and seqbox_outgoing stay, as views of the three generations, for an
-- operator reading by hand; seqbox's own statements never read them (a
-- view of a UNION is materialized whole before it is read).
CREATE OR REPLACE VIEW seqbox_body AS
SELECT id, msg_key, payload_type, payload, headers, created_at, 0 AS gen FROM seqbox_body_g0
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 1 AS gen FROM seqbox_body_g1
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 2 AS gen FROM seqbox_body_g2;

CREATE OR REPLACE VIEW seqbox_outgoing AS
SELECT partition_id, seq, body_id, sequenced_at, purged, 0 AS gen FROM seqbox_outgoing_g0
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 1 AS gen FROM seqbox_outgoing_g1
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 2 AS gen FROM seqbox_outgoing_g2;

-- The generation of a message's body, which its outgoing row takes when it
-- is moved: a generation's bodies and outgoing rows are truncated
-- together. Existing rows' bodies are in generation 0. An instant add.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'seqbox_incoming' AND column_name = 'body_gen') = 0,
    'ALTER TABLE seqbox_incoming ADD COLUMN body_gen TINYINT NOT NULL DEFAULT 0', 'DO 0');

PREPARE sb_migrate_ddl FROM @sb_migrate_ddl;

EXECUTE sb_migrate_ddl;

DEALLOCATE PREPARE sb_migrate_ddl;

-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses in every process (docs/ARCHITECTURE.md, "Vacuum").
CREATE TABLE IF NOT EXISTS seqbox_generations (
    gen TINYINT NOT NULL PRIMARY KEY,
    state VARCHAR(8) CHARACTER SET ascii NOT NULL,
    opened_at DATETIME(6) NULL,
    closed_at DATETIME(6) NULL,
    truncated_at DATETIME(6) NULL,
    prune_held_until DATETIME(6) NULL
) ENGINE=InnoDB;

INSERT IGNORE INTO seqbox_generations (gen, state, opened_at) VALUES (0, 'current', UTC_TIMESTAMP(6)), (1, 'empty', NULL), (2, 'empty', NULL);

-- Two stops per partition: incoming rows with negative ids, never moved,
-- counted or deleted, that begin each partition's range of the
-- (partition_id, id) index. A range read of the partition before it,
-- once past its last row, walks on through the delete-marked entries
-- that begin the next partition until it meets a live entry: InnoDB
-- checks a range's end only on those, and its read-ahead of rows asks
-- for one more after the first it meets. Under a held read view those
-- entries are every row moved since it began (docs/ARCHITECTURE.md,
-- "Cost that stays flat", stops). Partition p's stops are -2p and
-- -2p - 1; AUTO_INCREMENT only ever grows past the largest id, so they
-- take nothing from it. INSERT IGNORE makes a re-run a no-op.
INSERT IGNORE INTO seqbox_incoming (id, partition_id, body_id, body_gen)
SELECT -2 * p.id - s.n, p.id, UNHEX(REPEAT('00', 16)), -1
FROM seqbox_partitions p CROSS JOIN (SELECT 0 AS n UNION ALL SELECT 1) s;
