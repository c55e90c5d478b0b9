-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there and acks no longer touch this row; the
-- counter column is no longer used (docs/ARCHITECTURE.md, "Vacuum").
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has): the column is added
-- through a statement chosen from information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{vacuum_counter}' AND column_name = 'pruned_seq') = 0,
    'ALTER TABLE {vacuum_counter} ADD COLUMN pruned_seq BIGINT NOT NULL DEFAULT 0', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
UPDATE {vacuum_counter} v SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM {outgoing} o WHERE o.partition_id = v.partition_id),
    (SELECT p.processed_seq FROM {processor} p WHERE p.partition_id = v.partition_id), 0)
WHERE pruned_seq = 0
