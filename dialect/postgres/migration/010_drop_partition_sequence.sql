-- The last seq handed out is the top of outgoing (docs/ARCHITECTURE.md,
-- "Tables and locks"); partitions.sequence is no longer kept. Dropping it
-- makes a process of an earlier release, which would still number from it
-- and could hand out pruned seqs again, fail loudly instead.
ALTER TABLE {partitions} DROP COLUMN IF EXISTS sequence
