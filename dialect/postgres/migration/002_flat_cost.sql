-- Cost that stays flat (docs/ARCHITECTURE.md, "Tables and locks").
--
-- incoming.xid is the inserting transaction's id. The sequencer reads a
-- partition in (xid, id) order from a lower bound, partitions.incoming_xid,
-- below which every row is final and already moved: moved rows that no
-- vacuum may remove yet (a held snapshot, autovacuum off) are never scanned
-- again. Rows that exist before this migration read as xid 0, and every
-- bound starts at 0, so they are found first. Adding the column and its
-- default in one statement leaves no window in which a new row gets 0.
ALTER TABLE {incoming} ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT '0',
    ALTER COLUMN xid SET DEFAULT pg_current_xact_id()
-- seqbox:split
CREATE INDEX IF NOT EXISTS {incoming}_partition_xid ON {incoming} (partition_id, xid, id)
-- seqbox:split
DROP INDEX IF EXISTS {incoming}_partition_id
-- seqbox:split
ALTER TABLE {partitions} ADD COLUMN IF NOT EXISTS incoming_xid xid8 NOT NULL DEFAULT '0'
-- seqbox:split
-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there (no MIN(seq) over dead index entries) and
-- acks no longer touch this row. The counter column is no longer used.
ALTER TABLE {vacuum_counter} ADD COLUMN IF NOT EXISTS pruned_seq BIGINT NOT NULL DEFAULT 0
-- seqbox:split
UPDATE {vacuum_counter} v SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM {outgoing} o WHERE o.partition_id = v.partition_id),
    (SELECT p.processed_seq FROM {processor} p WHERE p.partition_id = v.partition_id), 0)
WHERE pruned_seq = 0
-- seqbox:split
-- Autovacuum must never truncate the hot tables: truncation holds an
-- ACCESS EXCLUSIVE lock that stalls every seqbox statement on the table
-- (seen as statements timing out behind wait event VacuumTruncate). The
-- space stays in the file and is reused by the next inserts.
ALTER TABLE {incoming} SET (vacuum_truncate = off)
-- seqbox:split
ALTER TABLE {outgoing} SET (vacuum_truncate = off)
-- seqbox:split
ALTER TABLE {body} SET (vacuum_truncate = off)
