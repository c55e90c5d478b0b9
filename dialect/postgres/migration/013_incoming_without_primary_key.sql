-- incoming's id orders a transaction's rows (the sequencer reads each
-- partition by (partition_id, xid, id)); nothing looks a row up by id
-- alone: the move deletes by ctid, and a purge by id within its partition.
-- The primary key's index cost every enqueued row an insert into a second
-- index and the cleanup of the moved rows' entries in it: about 4 of the
-- 14 µs of server time the incoming INSERT took per row (docs/ARCHITECTURE.md,
-- "Tables and locks"). The prefix is at most 32 characters, so the
-- constraint's name is never truncated.
ALTER TABLE {incoming} DROP CONSTRAINT IF EXISTS {incoming}_pkey
-- seqbox:split
-- A table without a primary key has no replica identity, and a publication
-- that publishes deletes (FOR ALL TABLES: CDC, an upgrade by logical
-- replication) would make every move's DELETE fail. FULL names the whole
-- row instead; it adds to the WAL only under wal_level = logical, and an
-- incoming row is about 60 bytes.
ALTER TABLE {incoming} REPLICA IDENTITY FULL
