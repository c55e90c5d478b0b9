-- The move's lower bound leaves the partitions row (docs/ARCHITECTURE.md,
-- "Cost that stays flat"). partitions.incoming_xid was rewritten by every
-- move that advanced it: a new version of the row each time, which a held
-- snapshot keeps, and every later lock or read of the row walked them all.
-- Now each bound is a row of {partitions}_bound, keyed (partition_id, xid):
-- a move inserts the new one and deletes the one it read, and the current
-- bound is the highest key, found by a backward probe of the primary key
-- that stops at the first row, however many deleted ones lie below it.
-- The old column stays: a process of an earlier release still running
-- reads and advances it; a bound of either is a lower bound (every row
-- below it moved, for good), so each side only reads a little more.
CREATE TABLE IF NOT EXISTS {partitions}_bound (
    partition_id BIGINT NOT NULL,
    xid xid8 NOT NULL,
    PRIMARY KEY (partition_id, xid)
)
-- seqbox:split
INSERT INTO {partitions}_bound (partition_id, xid)
SELECT id, incoming_xid FROM {partitions} WHERE incoming_xid <> '0'::xid8
ON CONFLICT DO NOTHING
