package sqlite

// Pieces of statement text that read body and outgoing in all three
// generations ({body_g0..2}, {outgoing_g0..2}; rotate.go). Each is written
// into the statements that use it, so that every statement still reads
// whole in testdata/sql/sqlite.sql; one text here keeps them from drifting
// apart.

// headExists is "partition pid has work": the row after its cursor
// exists. Three scalar probes of the generations' primary keys; the OR
// stops at the first that finds the row (seqs are gap-free above the
// cursor, tombstones included, and the vacuum deletes only at or below
// it).
func headExists(pid, cursor string) string {
	return `((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL
	OR (SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL
	OR (SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = ` + pid + ` AND o.seq = ` + cursor + ` + 1) IS NOT NULL)`
}

// lastSeq is the partition's last seq handed out: the largest of each
// generation's last row above the cursor, by its primary key backwards
// (one descent each), or the cursor when none has one (the rows were
// pruned or truncated). Without MariaDB's head probe first: SQLite keeps
// no deleted entries that a backward read could walk, and the bound on
// the cursor makes each arm one descent. Each arm is COALESCEd: scalar
// MAX is NULL when any argument is.
func lastSeq(pid, cursor string) string {
	return `MAX(COALESCE((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = ` + pid + ` AND o.seq > ` + cursor + ` ORDER BY o.seq DESC LIMIT 1), ` + cursor + `),
	COALESCE((SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = ` + pid + ` AND o.seq > ` + cursor + ` ORDER BY o.seq DESC LIMIT 1), ` + cursor + `),
	COALESCE((SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = ` + pid + ` AND o.seq > ` + cursor + ` ORDER BY o.seq DESC LIMIT 1), ` + cursor + `))`
}

// incomingBody is column col of incoming row i's body, read in the
// generation i.body_gen names: one primary-key probe, the other two arms
// never run.
func incomingBody(col string) string {
	return `CASE i.body_gen WHEN 0 THEN (SELECT b.` + col + ` FROM {body_g0} b WHERE b.id = i.body_id)
	WHEN 1 THEN (SELECT b.` + col + ` FROM {body_g1} b WHERE b.id = i.body_id)
	WHEN 2 THEN (SELECT b.` + col + ` FROM {body_g2} b WHERE b.id = i.body_id) END`
}

// headerMatch is "the headers h hold every pair of the filter ?headers"
// (purge.go): json_each, not a JSON path, so a header name needs no
// quoting.
func headerMatch(headers string) string {
	return `NOT EXISTS (SELECT 1 FROM json_each(?headers) f
	WHERE NOT EXISTS (SELECT 1 FROM json_each(` + headers + `) h WHERE h.key = f.key AND h.value = f.value))`
}
