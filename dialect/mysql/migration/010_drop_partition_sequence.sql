-- The last seq handed out is the top of outgoing (docs/ARCHITECTURE.md,
-- "Tables and locks"); partitions.sequence is no longer kept. Dropping it
-- makes a process of an earlier release, which would still number from it
-- and could hand out pruned seqs again, fail loudly instead.
-- MySQL 8 has no DROP COLUMN IF EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{partitions}' AND column_name = 'sequence') = 1,
    'ALTER TABLE {partitions} DROP COLUMN sequence',
    'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
