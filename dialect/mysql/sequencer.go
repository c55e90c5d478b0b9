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
	// incoming would read the whole backlog.
	IncomingPartitions *kit.Stmt
}

var sequencerSQL = sequencerStmts{
	IncomingPartitions: kit.Inline(`SELECT pa.id FROM {partitions} pa
WHERE EXISTS (SELECT 1 FROM {incoming} i WHERE i.partition_id = pa.id)`),
}

// moveSQL is the move as several simple statements in one transaction.
var moveSQL = kit.MoveSQL{
	// SKIP LOCKED: a partition another sequencer is moving is skipped, not
	// waited for.
	LockPartition: kit.Inline(`SELECT sequence FROM {partitions} WHERE id = ?pid FOR UPDATE SKIP LOCKED`),
	// A plain read: the partition lock already serialises sequencers, and
	// rows of still-open producers are invisible here; they get later seqs.
	SelectIncoming: kit.Inline(`SELECT id, body_id FROM {incoming} WHERE partition_id = ?pid ORDER BY id LIMIT ?limit`),
	SetSequence:    kit.Inline(`UPDATE {partitions} SET sequence = ?sequence WHERE id = ?pid`),
	// In id order, the order every several-partition move locks them in.
	LockPartitions: kit.Inline(`SELECT id, sequence FROM {partitions} WHERE id IN (?pids) ORDER BY id FOR UPDATE SKIP LOCKED`),
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
	SelectHeads: kit.Prepare(`SELECT STRAIGHT_JOIN i.partition_id, i.id, i.body_id
FROM (SELECT DISTINCT p.pid, COALESCE((SELECT x.id FROM {incoming} x FORCE INDEX ({incoming}_partition_id)
		WHERE x.partition_id = p.pid ORDER BY x.id LIMIT 1 OFFSET ?offset), 9223372036854775807) AS last_id
	FROM JSON_TABLE(?pids, '$[*]' COLUMNS (pid BIGINT PATH '$')) p) h
JOIN {incoming} i FORCE INDEX ({incoming}_partition_id)
	ON i.partition_id >= h.pid AND i.partition_id <= h.pid AND i.id <= h.last_id`),
	SetSequences: kit.Inline(`UPDATE {partitions} SET sequence = CASE id ?cases END WHERE id IN (?pids)`,
		kit.List{Name: "cases", Item: `WHEN ?pid THEN ?sequence`, Sep: " "}),
	Write: kit.WriteSQL{
		InsertOutgoing: kit.Inline(`INSERT INTO {outgoing} (partition_id, seq, body_id, sequenced_at) VALUES ?rows`,
			kit.Rows(`(?pid, ?seq, ?body_id, UTC_TIMESTAMP(6))`)),
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
