-- A queue with the Park failure policy stops a partition at a head that
-- exhausted its attempts: parked_at marks it, and no process leases it
-- until an operator resumes or skips it (docs/ARCHITECTURE.md, "Failure
-- policy: dead-letter or park").
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{processor}' AND column_name = 'parked_at') = 0,
    'ALTER TABLE {processor} ADD COLUMN parked_at DATETIME(6) NULL', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
