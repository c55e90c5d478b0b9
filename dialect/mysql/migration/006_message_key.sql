-- A message's Key is stored with it and handed to handlers (Delivery.Key),
-- so a relay can use it as a broker's partition or routing key; a dead
-- letter keeps it and its replay carries it. Bytes, as Go strings are.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: each statement is chosen from
-- information_schema, so a re-run is a no-op.
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{body}' AND column_name = 'msg_key') = 0,
    'ALTER TABLE {body} ADD COLUMN msg_key BLOB NULL', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
-- seqbox:split
SET @sb_migrate_ddl = IF((SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '{dead_letters}' AND column_name = 'msg_key') = 0,
    'ALTER TABLE {dead_letters} ADD COLUMN msg_key BLOB NULL', 'DO 0')
-- seqbox:split
PREPARE sb_migrate_ddl FROM @sb_migrate_ddl
-- seqbox:split
EXECUTE sb_migrate_ddl
-- seqbox:split
DEALLOCATE PREPARE sb_migrate_ddl
