-- Dead letters an operator acts on (docs/ARCHITECTURE.md, "Dead letters"):
-- note is the operator's note (resolve) or reason (discard); replay_id is
-- the id of the copy a replay enqueued, found again when that copy is acked.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{dead_letters}' AND column_name = 'replay_id') = 0,
    'ALTER TABLE {dead_letters} ADD COLUMN note TEXT CHARACTER SET utf8mb4 NULL, ADD COLUMN replay_id BINARY(16) NULL, ADD KEY {dead_letters}_replay_id (replay_id), ADD KEY {dead_letters}_partition (partition_id, id)',
    'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
