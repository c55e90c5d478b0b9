-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there and acks no longer touch this row; the
-- counter column is no longer used (docs/ARCHITECTURE.md, "Vacuum").
-- SQLite has no ADD COLUMN IF NOT EXISTS; it needs none: migrations run
-- inside the BEGIN IMMEDIATE that serialises them, with the version record,
-- so this one commits whole or not at all.
ALTER TABLE {vacuum_counter} ADD COLUMN pruned_seq INTEGER NOT NULL DEFAULT 0
-- seqbox:split
UPDATE {vacuum_counter} SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM {outgoing} o WHERE o.partition_id = {vacuum_counter}.partition_id),
    (SELECT p.processed_seq FROM {processor} p WHERE p.partition_id = {vacuum_counter}.partition_id), 0)
WHERE pruned_seq = 0
