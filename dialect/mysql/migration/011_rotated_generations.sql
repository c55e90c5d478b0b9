-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become three generations of separate tables,
-- {body_g0}, {body_g1}, {body_g2} and {outgoing_g0}, … {outgoing_g2}; every statement names the ones
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
-- named {body} is still there), the rest are IF NOT EXISTS or OR REPLACE.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
    AND table_name = '{body}' AND table_type = 'BASE TABLE') = 1,
    'RENAME TABLE {body} TO {body_g0}, {outgoing} TO {outgoing_g0}', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
CREATE TABLE IF NOT EXISTS {body_g1} LIKE {body_g0}
-- seqbox:split
CREATE TABLE IF NOT EXISTS {body_g2} LIKE {body_g0}
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing_g1} LIKE {outgoing_g0}
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing_g2} LIKE {outgoing_g0}
-- seqbox:split
-- {body} and {outgoing} stay, as views of the three generations, for an
-- operator reading by hand; seqbox's own statements never read them (a
-- view of a UNION is materialized whole before it is read).
CREATE OR REPLACE VIEW {body} AS
SELECT id, msg_key, payload_type, payload, headers, created_at, 0 AS gen FROM {body_g0}
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 1 AS gen FROM {body_g1}
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 2 AS gen FROM {body_g2}
-- seqbox:split
CREATE OR REPLACE VIEW {outgoing} AS
SELECT partition_id, seq, body_id, sequenced_at, purged, 0 AS gen FROM {outgoing_g0}
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 1 AS gen FROM {outgoing_g1}
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 2 AS gen FROM {outgoing_g2}
-- seqbox:split
-- The generation of a message's body, which its outgoing row takes when it
-- is moved: a generation's bodies and outgoing rows are truncated
-- together. Existing rows' bodies are in generation 0. An instant add.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{incoming}' AND column_name = 'body_gen') = 0,
    'ALTER TABLE {incoming} ADD COLUMN body_gen TINYINT NOT NULL DEFAULT 0', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses in every process (docs/ARCHITECTURE.md, "Vacuum").
CREATE TABLE IF NOT EXISTS {generations} (
    gen TINYINT NOT NULL PRIMARY KEY,
    state VARCHAR(8) CHARACTER SET ascii NOT NULL,
    opened_at DATETIME(6) NULL,
    closed_at DATETIME(6) NULL,
    truncated_at DATETIME(6) NULL,
    prune_held_until DATETIME(6) NULL
) ENGINE=InnoDB
-- seqbox:split
INSERT IGNORE INTO {generations} (gen, state, opened_at) VALUES (0, 'current', UTC_TIMESTAMP(6)), (1, 'empty', NULL), (2, 'empty', NULL)
