-- Two stops per partition: incoming rows with negative ids, never moved,
-- counted or deleted, that begin each partition's range of the
-- (partition_id, id) index. A range read of the partition before it,
-- once past its last row, walks on through the delete-marked entries
-- that begin the next partition until it meets a live entry: InnoDB
-- checks a range's end only on those, and its read-ahead of rows asks
-- for one more after the first it meets. Under a held read view those
-- entries are every row moved since it began (docs/ARCHITECTURE.md,
-- "Cost that stays flat", stops). Partition p's stops are -2p and
-- -2p - 1; AUTO_INCREMENT only ever grows past the largest id, so they
-- take nothing from it. INSERT IGNORE makes a re-run a no-op.
INSERT IGNORE INTO {incoming} (id, partition_id, body_id, body_gen)
SELECT -2 * p.id - s.n, p.id, UNHEX(REPEAT('00', 16)), -1
FROM {partitions} p CROSS JOIN (SELECT 0 AS n UNION ALL SELECT 1) s
