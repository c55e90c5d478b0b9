package postgres

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// A move reads a partition's incoming rows in (xid, id) order — xid is the
// inserting transaction's id — starting at the partition's lower bound,
// the highest xid of its rows in {partitions}_bound (paramBound). Every
// row below the bound is final (its transaction ended) and already moved,
// so the rows a move deleted but no
// vacuum could remove yet (an unrelated transaction holding a snapshot,
// autovacuum off) are never read again: a read costs the same at any age.
//
// The order keeps the guarantee: a transaction that committed before
// another began got its xid first. After a move that saw snapshot xmin X
// (the oldest transaction still running, whose rows may yet appear), the
// bound becomes max(bound, X), or max(bound, min(X, last xid moved)) when
// the batch was full and rows of that transaction may remain. A read-only
// transaction, however long, has no xid and never holds X back; a long
// unrelated write transaction does, and reads then cost as they did before.
// The bound is written only when it moves, and never as an UPDATE: a move
// inserts the new bound's row and deletes the one it read. Rewritten in
// the partition's row, each bound was a new version of it, which a held
// snapshot keeps, and every later lock or read of the row walked them all
// (BENCHMARKS.md, "Where a held snapshot's cost grows, second look"). The
// deleted rows a held snapshot keeps lie below the live one in the primary
// key, and the backward probe stops at the first row it can see
// (docs/ARCHITECTURE.md, "Cost that stays flat"). The bound is read in the
// statement after the lock, never in the lock's: a lock statement's
// snapshot can predate the previous holder's commit, and a bound read
// there could be one that holder already replaced (see below).
//
// The last seq handed out is not kept in a row: it is the top of the
// partition's outgoing rows, or its cursor when the vacuum has pruned them
// all (it deletes only rows at or below the cursor, and the cursor never
// passes the top). It is read as one index probe, never a walk of the
// pruned rows below the cursor: the last seq above processed_seq, or
// processed_seq when there is none. Only the partition lock's holder
// allocates, so the read is exact — provided its snapshot was taken after
// the lock: a lock statement's own snapshot can predate the commit of the
// move that held the lock before it (a lock leaves no row version to
// re-read), so every move reads the top in the statement after the lock
// (SequenceMove says why there is no one-statement move).
//
// Every move's transaction commits as WithSynchronousCommit chose
// (asynchronously by default): the set_config condition in its first
// statement is always true, and sets the setting for the statement's
// transaction at no extra round trip (see processor.go; docs/ARCHITECTURE.md,
// "Asynchronous commits"). The several-statement moves turn bitmap scans off the same
// way, for the rest of their transaction: the planner estimates fewer
// rows per partition than the batch limit and picks a bitmap heap scan
// plus sort, which visits every deleted-but-not-vacuumed row of the
// partition on each move, where a plain index scan marks those index
// entries dead once and skips them afterwards (BENCHMARKS.md, "Figures
// behind design choices", "PostgreSQL move with bitmap scans off").
//
// The statements after the lock are prepared, and the lock sets their
// plans for the rest of the transaction: generic (plan_cache_mode), so a
// move is neither parsed nor planned again, and without sequential scans
// (enable_seqscan). Parsing and planning had cost about as much server
// time as running them; but a generic plan is kept until something
// invalidates it, and one made while a table was small may scan it whole
// for the rest of the connection's life: a DELETE by ctid planned as a
// sequential scan of incoming took 0.5–0.8 s per move. With sequential
// scans off every plan probes an index or a ctid, whatever the table held
// when it was made (TestMoveGenericPlansScanNoTable; BENCHMARKS.md,
// "Figures behind design choices", "The move prepared"). The lock itself is
// inlined, planned on every call: its settings reach only the statements
// after it.
//
// Partition rows are locked FOR NO KEY UPDATE: it does not conflict with
// the KEY SHARE a foreign key takes, and is all a non-key UPDATE needs;
// SKIP LOCKED passes over a partition another sequencer is moving.

// moves is the sequencer's statements but the end of a move (writeSQL).
type moves struct {
	// IncomingPartitions lists the partitions with rows to move: one index
	// probe per partition from its lower bound (DISTINCT over incoming
	// would read the whole backlog, and every dead row not yet vacuumed).
	IncomingPartitions *kit.Stmt

	// Lock, Select and Update are the one-partition move as several
	// simple statements. Lock locks partition ?pid's row and reads the
	// snapshot's xmin as a bigint; its always-true
	// set_config conditions turn bitmap and sequential scans off, make the
	// plans generic and set seqbox's synchronous_commit for the move's
	// transaction at no extra round trip (see above).
	// Select reads up to ?limit rows from the partition's bound, each with
	// its ctid (the delete's key, stable under the partition lock), the
	// bound and the partition's last seq handed out (top; see above);
	// Update replaces bound ?old with ?bound, only when it moved.
	Lock   *kit.Stmt
	Select *kit.Stmt
	Update *kit.Stmt

	// ManyLock, ManySelect and ManyUpdate are the several-partition move:
	// the same steps for any number of partitions, each list one array
	// value (?pids ?olds ?bounds, kit.PGArray) so that the text does not
	// change with their number. ManyLock sets its transaction's settings as
	// Lock does; ManySelect reads each partition's bound and top with its
	// rows; ManyUpdate replaces the bounds that moved.
	ManyLock   *kit.Stmt
	ManySelect *kit.Stmt
	ManyUpdate *kit.Stmt
}

var moveSQL = moves{
	// The reconciler's list: one probe of each partition's head from its
	// bound, by the (partition_id, xid, id) index (the ORDER BY makes the
	// index the only cheap way). A scalar subquery, not EXISTS: with many
	// partitions, or on a table grown by dead rows, the planner turned the
	// EXISTS into a hash semi-join over a scan of all of incoming, dead rows
	// included, once a second; under a held snapshot each call walked every
	// row deleted since it began (docs/ARCHITECTURE.md, "Plans that do not
	// depend on statistics").
	IncomingPartitions: kit.Inline(`SELECT pa.id FROM {partitions} pa
WHERE (SELECT i.id FROM {incoming} i WHERE i.partition_id = pa.id AND i.xid >= ` + partitionBound + `
	ORDER BY i.xid, i.id LIMIT 1) IS NOT NULL`),

	Lock: kit.Inline(`SELECT (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint AS xmin
FROM {partitions}
WHERE id = ?pid
	AND set_config('enable_bitmapscan', 'off', true) = 'off'
	AND set_config('enable_seqscan', 'off', true) = 'off'
	AND set_config('plan_cache_mode', 'force_generic_plan', true) = 'force_generic_plan'
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL
FOR NO KEY UPDATE SKIP LOCKED`),
	// top is an InitPlan, run once whatever the number of rows; the bound
	// (bd) a one-row subquery read once (OFFSET 0 keeps it from being
	// flattened into an expression probed again where it is named), which
	// the head's read (m) starts from. m orders by the table's columns,
	// i.xid: a bare "xid" would name the bigint output column, which the
	// index does not order, and every move read and sorted the
	// partition's whole backlog from the bound (23 ms for 20,000 rows,
	// against 0.06 ms for the first 100 by index).
	Select: kit.Prepare(`SELECT m.id, m.tid, m.body_id, m.body_gen, m.xid,
	(SELECT COALESCE((SELECT o.seq FROM {outgoing} o WHERE o.partition_id = pr.partition_id AND o.seq > pr.processed_seq
		ORDER BY o.seq DESC LIMIT 1), pr.processed_seq) FROM {processor} pr WHERE pr.partition_id = ?pid ORDER BY pr.version DESC LIMIT 1) AS top,
	(bd.xid::text)::bigint AS bound
FROM (SELECT ` + paramBound + ` AS xid OFFSET 0) bd
CROSS JOIN LATERAL (SELECT i.id, i.ctid::text AS tid, i.body_id, i.body_gen, (i.xid::text)::bigint AS xid FROM {incoming} i
	WHERE i.partition_id = ?pid AND i.xid >= bd.xid
	ORDER BY i.xid, i.id LIMIT ?limit) m
ORDER BY m.xid, m.id`),
	// The bound read is replaced: its row deleted, the new one inserted.
	// ON CONFLICT keeps a row of the new value already there rather than
	// failing the move: every row of the table is a valid bound.
	Update: kit.Prepare(`WITH d AS (DELETE FROM {partitions}_bound
	WHERE partition_id = ?pid AND xid = CAST(CAST(CAST(?old AS bigint) AS text) AS xid8))
INSERT INTO {partitions}_bound (partition_id, xid) VALUES (?pid, CAST(CAST(CAST(?bound AS bigint) AS text) AS xid8))
ON CONFLICT DO NOTHING`),

	ManyLock: kit.Inline(`SELECT id, (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint AS xmin
FROM {partitions}
WHERE id = ANY(CAST(?pids AS bigint[]))
	AND set_config('enable_bitmapscan', 'off', true) = 'off'
	AND set_config('enable_seqscan', 'off', true) = 'off'
	AND set_config('plan_cache_mode', 'force_generic_plan', true) = 'force_generic_plan'
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL
ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`),
	// Each partition's bound (bd), top (t) and its head of line from its
	// bound (m), all by index (LATERAL). bd's OFFSET 0 keeps it a subquery
	// run once per partition, not an expression probed again for every
	// row it is named in. t's LIMIT keeps it a subquery run once
	// per partition (without one the planner flattens it and runs the top
	// read once per row), and LEFT keeps a partition without a processor
	// row, its top NULL: that move fails (errNoProcessor). m orders by
	// the table's columns: a bare "ORDER BY xid" names the bigint output
	// column, and the index no longer gives that order (see Select).
	ManySelect: kit.Prepare(`SELECT r.pid AS partition_id, (bd.xid::text)::bigint AS bound, t.top, m.id, m.tid, m.body_id, m.body_gen, m.xid
FROM unnest(CAST(?pids AS bigint[])) AS r(pid)
CROSS JOIN LATERAL (SELECT ` + boundHead + `r.pid` + boundTail + ` AS xid OFFSET 0) bd
LEFT JOIN LATERAL (SELECT COALESCE((SELECT o.seq FROM {outgoing} o WHERE o.partition_id = pr.partition_id AND o.seq > pr.processed_seq
		ORDER BY o.seq DESC LIMIT 1), pr.processed_seq) AS top
	FROM {processor} pr WHERE pr.partition_id = r.pid ORDER BY pr.version DESC LIMIT 1) t ON true
CROSS JOIN LATERAL (SELECT i.id, i.ctid::text AS tid, i.body_id, i.body_gen, (i.xid::text)::bigint AS xid FROM {incoming} i
	WHERE i.partition_id = r.pid AND i.xid >= bd.xid
	ORDER BY i.xid, i.id LIMIT ?limit) m
ORDER BY r.pid, m.xid, m.id`),
	ManyUpdate: kit.Prepare(`WITH d AS (DELETE FROM {partitions}_bound b
	USING unnest(CAST(?pids AS bigint[]), CAST(?olds AS bigint[])) AS u(pid, old)
	WHERE b.partition_id = u.pid AND b.xid = CAST(CAST(u.old AS text) AS xid8))
INSERT INTO {partitions}_bound (partition_id, xid)
SELECT u.pid, CAST(CAST(u.bound AS text) AS xid8) FROM unnest(CAST(?pids AS bigint[]), CAST(?bounds AS bigint[])) AS u(pid, bound)
ON CONFLICT DO NOTHING`),
}

// The move's lower bound of a partition, an xid8: the highest xid of its
// rows in {partitions}_bound, by a backward probe of the primary key, or 0
// when it has none (a partition no move has advanced yet). boundHead, the
// partition's id (a column or a placeholder), boundTail; partitionBound is
// row pa's, paramBound partition ?pid's.
const (
	boundHead      = `COALESCE((SELECT bnd.xid FROM {partitions}_bound bnd WHERE bnd.partition_id = `
	boundTail      = ` ORDER BY bnd.xid DESC LIMIT 1), '0'::xid8)`
	partitionBound = boundHead + `pa.id` + boundTail
	paramBound     = boundHead + `?pid` + boundTail
)

// boundTable is the table of the bounds, {partitions}_bound (migration 014).
func boundTable(t dialect.Tables) string { return t.Partitions + "_bound" }

// writeSQL is the end of every several-statement move. An outgoing row
// goes to the generation of its body (incoming.body_gen, ?gen), so that a
// generation's bodies and outgoing rows are truncated together
// (docs/ROTATION.md).
var writeSQL = kit.WriteSQL{
	// One array per column, the body ids packed (kit.PGPack): the
	// statement's text is the same for any number of rows, so it is
	// prepared once (a VALUES list was parsed and planned on every move, as
	// much as the insert itself; BENCHMARKS.md, "Figures behind design
	// choices", "The move prepared").
	InsertOutgoing: kit.Prepare(`INSERT INTO {outgoing} (partition_id, seq, body_id, sequenced_at, gen)
SELECT u.pid, u.seq, ` + kit.PGUnpack("?body_ids", "u.body_id") + `, now(), u.gen
FROM unnest(CAST(?pids AS bigint[]), CAST(?seqs AS bigint[]), CAST(?body_id_spans AS bigint[]), CAST(?gens AS smallint[])) AS u(pid, seq, body_id, gen)`),
	InsertArgs: outgoingArrays,
	// By ctid, read under the partition lock, which makes it stable: only
	// the lock holder deletes a partition's rows and nothing updates them.
	// A join of the ids to the primary key was planned, once autovacuum's
	// ANALYZE had seen a table of dead rows, as a scan of incoming, and the
	// sequencer stalled; "id IN (…1000 literals…)" was slow to plan and
	// became a sequential scan (docs/ARCHITECTURE.md, "Plans that do not
	// depend on statistics"; BENCHMARKS.md, "Figures behind design
	// choices", "PostgreSQL move deletes by ctid"). A TID scan, whatever
	// the statistics say.
	DeleteIncoming: kit.Prepare(`DELETE FROM {incoming} WHERE ctid = ANY(CAST(?moved AS tid[]))`),
	DeleteArg:      tidArray,
}

// outgoingArrays is InsertOutgoing's rows, one array per column.
func outgoingArrays(rows []kit.MovedRow) kit.Args {
	pids, seqs, gens := make([]int64, len(rows)), make([]int64, len(rows)), make([]int64, len(rows))
	ids := make([][]byte, len(rows))
	for i, r := range rows {
		pids[i], seqs[i], ids[i], gens[i] = r.PartitionID, r.Seq, r.BodyID, int64(r.Gen)
	}
	packed := kit.PGPack(ids)
	return kit.Args{"pids": kit.PGArray(pids), "seqs": kit.PGArray(seqs), "body_ids": packed.Blob, "body_id_spans": packed.Spans, "gens": kit.PGArray(gens)}
}

// tidArray renders the moved rows' ctids as one tid[] value,
// {"(0,1)","(0,2)"}.
func tidArray(rows []kit.MovedRow) any {
	b := make([]byte, 0, 12*len(rows)+2)
	b = append(b, '{')
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, r.IncomingTID...)
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// IncomingPartitionList lists partitions with rows to move.
func (d *pgDialect) IncomingPartitionList(ctx context.Context, _ *dialect.IncomingPartitionListParams) ([]int64, error) {
	return kit.ReadIDs(ctx, d.Runner, moveSQL.IncomingPartitions, nil)
}

type moveRow struct {
	ID      int64  `bun:"id"`
	TID     string `bun:"tid"`
	BodyID  []byte `bun:"body_id"`
	BodyGen int16  `bun:"body_gen"`
	XID     int64  `bun:"xid"`
	Top     *int64 `bun:"top"` // nil: no processor row
	Bound   int64  `bun:"bound"`
}

// errNoProcessor refuses to number a partition without a processor row
// (registration writes both in one transaction): its seqs would start
// again at 1.
func errNoProcessor(pid int64) error {
	return fmt.Errorf("seqbox: partition %d has no processor row", pid)
}

// nextBound is the lower bound after a move; see the comment above.
func nextBound(bound, xmin, lastXID int64, full bool) int64 {
	next := xmin
	if full {
		next = min(xmin, lastXID)
	}
	return max(bound, next)
}

// SequenceMove moves one batch as several simple statements.
//
// A one-statement move (a writable CTE) drained a backlog 10–20% faster,
// but its snapshot is taken before its lock: the last seq it reads can
// predate another process's move of the partition, and if that move's
// rows were delivered and pruned before its insert, nothing collides and
// it hands out their seqs again, below the cursor, where no processor
// reads. The statements read the top in a statement after the lock
// (docs/ARCHITECTURE.md, "Tables and locks").
func (d *pgDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return d.sequenceMoveStatements(ctx, p)
}

// sequenceMoveStatements is the move as several simple statements in one
// transaction: lock the partition row, read from its bound with the top,
// set the bound if it moved, insert outgoing, delete exactly the rows read.
func (d *pgDialect) sequenceMoveStatements(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	var res dialect.SequenceMoveResult
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.SequenceMoveResult{PartitionID: p.PartitionID}
		var locks []struct {
			XMin int64 `bun:"xmin"`
		}
		if err := d.Query(ctx, tx, moveSQL.Lock, kit.Args{"pid": p.PartitionID}, &locks); err != nil {
			return err
		}
		if len(locks) == 0 {
			res.Skipped = true
			return nil
		}
		lock := locks[0]
		var rows []moveRow
		if err := d.Query(ctx, tx, moveSQL.Select, kit.Args{"pid": p.PartitionID, "limit": p.Limit}, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		if rows[0].Top == nil {
			return errNoProcessor(p.PartitionID)
		}
		base, n := *rows[0].Top, int64(len(rows))
		old := rows[0].Bound
		if bound := nextBound(old, lock.XMin, rows[len(rows)-1].XID, len(rows) == p.Limit); bound != old {
			if _, err := d.Exec(ctx, tx, moveSQL.Update, kit.Args{"old": old, "bound": bound, "pid": p.PartitionID}); err != nil {
				return err
			}
		}
		moved := make([]kit.MovedRow, len(rows))
		for i, r := range rows {
			moved[i] = kit.MovedRow{PartitionID: p.PartitionID, Seq: base + int64(i) + 1, BodyID: r.BodyID, IncomingID: r.ID, IncomingTID: r.TID, Gen: r.BodyGen}
		}
		if err := writeSQL.Write(ctx, d.Runner, tx, moved); err != nil {
			return err
		}
		res = dialect.SequenceMoveResult{PartitionID: p.PartitionID, Moved: len(rows), FirstSeq: base + 1, LastSeq: base + n}
		return nil
	})
	if err != nil {
		return dialect.SequenceMoveResult{}, err
	}
	return res, nil
}

type moveManyRow struct {
	PartitionID int64  `bun:"partition_id"`
	Bound       int64  `bun:"bound"`
	Top         *int64 `bun:"top"` // nil: no processor row
	ID          int64  `bun:"id"`
	TID         string `bun:"tid"`
	BodyID      []byte `bun:"body_id"`
	BodyGen     int16  `bun:"body_gen"`
	XID         int64  `bun:"xid"`
}

func (r moveManyRow) Keys() (pid, id int64) { return r.PartitionID, r.ID }

// SequenceMoveMany moves several partitions in one transaction of five
// statements at most, each partition from its own lower bound.
func (d *pgDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	var out []dialect.SequenceMoveResult
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = make([]dialect.SequenceMoveResult, len(p.PartitionIDs))
		var locks []struct {
			ID   int64 `bun:"id"`
			XMin int64 `bun:"xmin"`
		}
		if err := d.Query(ctx, tx, moveSQL.ManyLock, kit.Args{"pids": kit.PGArray(p.PartitionIDs)}, &locks); err != nil {
			return err
		}
		locked := make(map[int64]bool, len(locks))
		pids := make([]int64, len(locks))
		for i, l := range locks {
			locked[l.ID], pids[i] = true, l.ID
		}
		for i, pid := range p.PartitionIDs {
			out[i] = dialect.SequenceMoveResult{PartitionID: pid, Skipped: !locked[pid]}
		}
		if len(locks) == 0 {
			return nil
		}
		var rows []moveManyRow
		if err := d.Query(ctx, tx, moveSQL.ManySelect, kit.Args{"pids": kit.PGArray(pids), "limit": p.Limit}, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		// Rows come per partition in (xid, id) order, each with its
		// partition's bound and top: the last of each partition is its
		// last xid read.
		top, lastXID, old := map[int64]int64{}, map[int64]int64{}, map[int64]int64{}
		for _, r := range rows {
			if r.Top == nil {
				return errNoProcessor(r.PartitionID)
			}
			top[r.PartitionID], lastXID[r.PartitionID], old[r.PartitionID] = *r.Top, r.XID, r.Bound
		}
		moved, seqs := kit.NumberRows(rows, top)
		var upPIDs, upOlds, upBounds []int64
		for _, l := range locks {
			if m := moved[l.ID]; m != nil {
				if bound := nextBound(old[l.ID], l.XMin, lastXID[l.ID], m.N == p.Limit); bound != old[l.ID] {
					upPIDs, upOlds, upBounds = append(upPIDs, l.ID), append(upOlds, old[l.ID]), append(upBounds, bound)
				}
			}
		}
		if len(upPIDs) > 0 {
			if _, err := d.Exec(ctx, tx, moveSQL.ManyUpdate,
				kit.Args{"pids": kit.PGArray(upPIDs), "olds": kit.PGArray(upOlds), "bounds": kit.PGArray(upBounds)}); err != nil {
				return err
			}
		}
		writes := make([]kit.MovedRow, len(rows))
		for i, r := range rows {
			writes[i] = kit.MovedRow{PartitionID: r.PartitionID, Seq: seqs[i], BodyID: r.BodyID, IncomingID: r.ID, IncomingTID: r.TID, Gen: r.BodyGen}
		}
		if err := writeSQL.Write(ctx, d.Runner, tx, writes); err != nil {
			return err
		}
		kit.FillMoved(out, moved)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
