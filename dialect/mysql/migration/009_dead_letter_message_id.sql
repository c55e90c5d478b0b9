-- A dead letter is found by its message id (DeadLetters.Get, `seqbox dlq
-- show`, the web UI's links by message id): by index, not by a scan.
-- MySQL 8 has no CREATE INDEX IF NOT EXISTS: the statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE()
    AND table_name = '{dead_letters}' AND index_name = '{dead_letters}_message_id') = 0,
    'ALTER TABLE {dead_letters} ADD KEY {dead_letters}_message_id (message_id)',
    'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
