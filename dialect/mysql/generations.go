package mysql

// Pieces of statement text that read body and outgoing in all three
// generations ({body_g0..2}, {outgoing_g0..2}; rotate.go). Each is written
// into the statements that use it, so that every statement still reads
// whole in testdata/sql/mysql.sql; one text here keeps them from drifting
// apart.

// headExists is "partition pid has work": the row after its cursor
// exists. Three scalar probes of the generations' primary keys, each an
// eq_ref that the optimizer runs as written (an EXISTS it may turn into a
// semi-join, whose choice follows the statistics); the OR stops at the
// first that finds the row. A correlated "seq > cursor" would be read by
// the partition prefix and filtered, through every row the vacuum deleted
// that InnoDB still keeps delete-marked for an open read view; the row at
// cursor + 1 is never deleted (seqs are gap-free above the cursor,
// tombstones included).
func headExists(pid, cursor string) string {
	return `((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL
	OR (SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL
	OR (SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL)`
}

// lastSeq is the partition's last seq handed out when its head exists
// (headExists): the largest of each generation's last row, read
// backwards, one dive each. Without a head the cursor is the answer, and
// a backward read could walk rows the vacuum deleted (see headExists); a
// generation whose rows of the partition are all at or below the cursor
// can still be walked so while the prune runs (docs/ROTATION.md,
// "MariaDB").
func lastSeq(pid, cursor string) string {
	return `CASE WHEN ` + headExists(pid, cursor) + `
	THEN GREATEST(COALESCE((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = ` + pid + ` ORDER BY o.seq DESC LIMIT 1), 0),
		COALESCE((SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = ` + pid + ` ORDER BY o.seq DESC LIMIT 1), 0),
		COALESCE((SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = ` + pid + ` ORDER BY o.seq DESC LIMIT 1), 0))
	ELSE ` + cursor + ` END`
}

// incomingBody is column col of incoming row i's body, read in the
// generation i.body_gen names: one primary-key probe, the other two arms
// never run.
func incomingBody(col string) string {
	return `CASE i.body_gen WHEN 0 THEN (SELECT b.` + col + ` FROM {body_g0} b WHERE b.id = i.body_id)
	WHEN 1 THEN (SELECT b.` + col + ` FROM {body_g1} b WHERE b.id = i.body_id)
	WHEN 2 THEN (SELECT b.` + col + ` FROM {body_g2} b WHERE b.id = i.body_id) END`
}
