package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// sequencerStmts are the sequencer's statements of this dialect's own.
type sequencerStmts struct {
	// IncomingPartitions lists the partitions with incoming rows (the
	// reconciler): one index probe per partition, where DISTINCT over
	// incoming would read the whole backlog. A scalar subquery with a
	// LIMIT, not EXISTS: MariaDB turned the EXISTS into a materialized
	// semi-join that scanned all of incoming's (partition_id, id) index:
	// with 1,024 partitions under load, 15,000 rows examined a call
	// against 2,000 for the probes (BENCHMARKS.md, "MariaDB: the buffer
	// pool, and what a held read view costs").
	IncomingPartitions *kit.Stmt
}

var sequencerSQL = sequencerStmts{
	IncomingPartitions: kit.Inline(`SELECT pa.id FROM {partitions} pa
WHERE (SELECT i.id FROM {incoming} i WHERE i.partition_id = pa.id ORDER BY i.id LIMIT 1) IS NOT NULL`),
}

// moveSQL is the move as several simple statements in one transaction.
var moveSQL = kit.MoveSQL{
	// SKIP LOCKED: a partition another sequencer is moving is skipped, not
	// waited for. A lock writes no row version: the partition row is not
	// rewritten by moves (docs/ARCHITECTURE.md, "Cost that stays flat").
	LockPartition: kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid FOR UPDATE SKIP LOCKED`),
	// A plain read: the partition lock already serialises sequencers, and
	// rows of still-open producers are invisible here; they get later seqs.
	SelectIncoming: kit.Inline(`SELECT id, body_id, body_gen FROM {incoming} WHERE partition_id = ?pid ORDER BY id LIMIT ?limit`),
	// Probes of the generations' primary keys per partition, never a walk
	// of the rows the vacuum deleted below the cursor (InnoDB keeps them,
	// delete-marked, while any read view may see them): is seq cursor+1
	// there, and if so the partition's last entry in each generation, read
	// backwards (lastSeq). A correlated range "seq > cursor" is read by the
	// partition prefix and filtered, through every delete-marked entry. A
	// plain read, in a statement after the partition lock: its snapshot
	// sees every move that held the lock before.
	Tops: kit.Inline(`SELECT pr.partition_id, ` + lastSeq("pr.partition_id", "pr.processed_seq") + ` AS top
FROM {processor} pr WHERE pr.partition_id IN (?pids)`),
	// In id order, the order every several-partition move locks them in.
	LockPartitions: kit.Inline(`SELECT id FROM {partitions} WHERE id IN (?pids) ORDER BY id FOR UPDATE SKIP LOCKED`),
	// Every partition's head of line in one statement of fixed text,
	// prepared once per connection (a UNION ALL arm per partition was a
	// new text, parsed and planned anew, on every call). Each partition's
	// last id to read is the one at ?offset in its index, read index-only
	// (h, kept a materialized table by DISTINCT so the bound is a value);
	// the rows are then read by a range of the (partition_id, id) index
	// per partition, up to that id: MariaDB has no LATERAL, and an equality
	// on partition_id would be a ref access that walks the partition's
	// whole backlog, so partition_id is bounded by >= and <= instead
	// (EXPLAIN: "Range checked for each record"). One statement, one read
	// view: the bounds and the rows agree.
	SelectHeads: kit.Prepare(`SELECT STRAIGHT_JOIN i.partition_id, i.id, i.body_id, i.body_gen
FROM (SELECT DISTINCT p.pid, COALESCE((SELECT x.id FROM {incoming} x FORCE INDEX ({incoming}_partition_id)
		WHERE x.partition_id = p.pid ORDER BY x.id LIMIT 1 OFFSET ?offset), 9223372036854775807) AS last_id
	FROM JSON_TABLE(?pids, '$[*]' COLUMNS (pid BIGINT PATH '$')) p) h
JOIN {incoming} i FORCE INDEX ({incoming}_partition_id)
	ON i.partition_id >= h.pid AND i.partition_id <= h.pid AND i.id <= h.last_id`),
	Write: kit.WriteSQL{
		// Into the generation of the rows' bodies, ?outgoing (rotate.go).
		InsertOutgoing: kit.Inline(`INSERT INTO ?outgoing (partition_id, seq, body_id, sequenced_at) VALUES ?rows`,
			kit.Rows(`(?pid, ?seq, ?body_id, UTC_TIMESTAMP(6))`)),
		PerGen: true,
		// The ids read, given as one JSON array, joined to incoming with
		// STRAIGHT_JOIN so every row is found by primary key. A plain
		// "DELETE … WHERE id IN (…)" may be planned as a table scan while
		// the table is small, and a scanning DELETE waits on any open
		// producer's uncommitted row (no semi-consistent read for DELETE),
		// stalling the sequencer for as long as that producer stays open.
		DeleteIncoming: kit.Inline(`DELETE i FROM JSON_TABLE(?moved, '$[*]' COLUMNS (id BIGINT PATH '$')) d
STRAIGHT_JOIN {incoming} i ON i.id = d.id`),
		DeleteArg: func(rows []kit.MovedRow) any { return kit.JSONArray(kit.IncomingIDs(rows)) },
	},
}

// IncomingPartitionList lists partitions with unsequenced rows.
func (d *mysqlDialect) IncomingPartitionList(ctx context.Context, _ *dialect.IncomingPartitionListParams) ([]int64, error) {
	return kit.ReadIDs(ctx, d.Runner, sequencerSQL.IncomingPartitions, nil)
}

// SequenceMove moves one batch with several simple statements.
func (d *mysqlDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return moveSQL.Move(ctx, d.Runner, p)
}

// SequenceMoveMany moves several partitions in one transaction of five
// statements.
func (d *mysqlDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	return moveSQL.MoveMany(ctx, d.Runner, p)
}
