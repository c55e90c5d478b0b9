-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler. Chosen from
-- information_schema, so a re-run is a no-op (MySQL 8 has no ADD COLUMN IF
-- NOT EXISTS); an instant column add on MySQL 8 and MariaDB.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{outgoing}' AND column_name = 'purged') = 0,
    'ALTER TABLE {outgoing} ADD COLUMN purged TINYINT NOT NULL DEFAULT 0', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{processor}' AND column_name = 'lease_limit') = 0,
    'ALTER TABLE {processor} ADD COLUMN lease_limit INT NULL', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
-- Purges that made tombstones in the partition (read back by PostgreSQL's
-- one-statement leases; kept on every database so the purge is one SQL).
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{processor}' AND column_name = 'purges') = 0,
    'ALTER TABLE {processor} ADD COLUMN purges BIGINT NOT NULL DEFAULT 0', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
