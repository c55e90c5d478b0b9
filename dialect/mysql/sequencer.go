package mysql

import (
	"context"
	"strconv"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// sequencerStmts are the sequencer's statements of this dialect's own.
type sequencerStmts struct {
	// Partitions lists every partition, for the reconciler: which of them
	// have incoming rows is the head read's (moveSQL.SelectHeads), one row
	// per arm, each from the partition's floor (floors.go). The probe it
	// replaced, a scalar subquery per partition, read from each
	// partition's start through every row moved while a read view was
	// held: 36 ms a call after half a minute of a held read view at 6,000
	// msgs/s, and 155 ms once it had to skip the stops (migration 012) by
	// "id > 0" (BENCHMARKS.md, "MariaDB: the walk past a range's end"). A
	// join reading from the floors, each partition range-checked, took
	// 2.3 s a call at 1,024 partitions under load (BENCHMARKS.md,
	// "MariaDB's move floors"); the arms are 32 index reads a statement.
	Partitions *kit.Stmt
}

var sequencerSQL = sequencerStmts{
	Partitions: kit.Inline(`SELECT id FROM {partitions} ORDER BY id`),
}

// headArms is how many partitions the several-partition head read reads
// per statement: the sequencer's default MovePartitions.
const headArms = 32

// moveSQL is the move as several simple statements in one transaction.
var moveSQL = kit.MoveSQL{
	// SKIP LOCKED: a partition another sequencer is moving is skipped, not
	// waited for. A lock writes no row version: the partition row is not
	// rewritten by moves (docs/ARCHITECTURE.md, "Cost that stays flat").
	LockPartition: kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid FOR UPDATE SKIP LOCKED`),
	// A plain read: the partition lock already serialises sequencers, and
	// rows of still-open producers are invisible here; they get later seqs.
	// Above the partition's floor (floors.go): a range of the
	// (partition_id, id) index that starts there.
	SelectIncoming: kit.Inline(`SELECT id, body_id, body_gen FROM {incoming} WHERE partition_id = ?pid AND id > ?after ORDER BY id LIMIT ?limit`),
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
	// prepared once per connection: an arm per partition, each a range of
	// the (partition_id, id) index from the partition's floor (floors.go)
	// up to ?limit rows, the unused arms given partition 0, whose range
	// ends at the first partition's stops (migration 012). A text per
	// number of partitions was parsed and planned anew on every call; one
	// JSON_TABLE of partitions needed a correlated subquery for each
	// partition's last id, and MariaDB reads a correlated equality on
	// partition_id as a ref access from the partition's start, through
	// every delete-marked entry a read view keeps, whatever the bound on
	// id. A prepared statement is optimized with its values, so each arm
	// is a range read that starts at its floor. One statement, one read
	// view.
	SelectHeads: kit.Prepare(kit.HeadArms(`SELECT i.partition_id, i.id, i.body_id, i.body_gen FROM {incoming} i FORCE INDEX ({incoming}_partition_id)
	WHERE i.partition_id = ?p%d AND i.id > ?a%d ORDER BY i.id LIMIT ?limit`, headArms)),
	HeadArms: headArms,
	Write: kit.WriteSQL{
		// Into the generation of the rows' bodies (rotate.go).
		InsertOutgoingGen: kit.PerGeneration(func(g int) *kit.Stmt {
			return kit.Inline(`INSERT INTO {outgoing_g`+strconv.Itoa(g)+`} (partition_id, seq, body_id, sequenced_at) VALUES ?rows`,
				kit.Rows(`(?pid, ?seq, ?body_id, UTC_TIMESTAMP(6))`))
		}),
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

// IncomingPartitionList lists partitions with unsequenced rows: those
// with a row above their floor.
func (d *mysqlDialect) IncomingPartitionList(ctx context.Context, _ *dialect.IncomingPartitionListParams) ([]int64, error) {
	pids, err := kit.ReadIDs(ctx, d.Runner, sequencerSQL.Partitions, nil)
	if err != nil {
		return nil, err
	}
	f, _, _ := d.floors.before(pids)
	return moveSQL.HeadPartitions(ctx, d.Runner, d.DB(), pids, f)
}

// SequenceMove moves one batch with several simple statements, from the
// partition's floor.
func (d *mysqlDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	d.tick(ctx)
	f, safe, learn := d.floors.before([]int64{p.PartitionID})
	res, err := moveSQL.Move(ctx, d.Runner, p, f)
	if err == nil && learn && !res.Skipped {
		d.floors.after(f, safe, []int64{p.PartitionID}, func(int64) bool { return res.Moved >= p.Limit })
	}
	return res, err
}

// SequenceMoveMany moves several partitions in one transaction of five
// statements, each from its floor.
func (d *mysqlDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	d.tick(ctx)
	f, safe, learn := d.floors.before(p.PartitionIDs)
	out, err := moveSQL.MoveMany(ctx, d.Runner, p, f)
	if err == nil && learn {
		moved := make(map[int64]int, len(out))
		locked := make([]int64, 0, len(out))
		for _, r := range out {
			if !r.Skipped {
				locked = append(locked, r.PartitionID)
				moved[r.PartitionID] = r.Moved
			}
		}
		d.floors.after(f, safe, locked, func(pid int64) bool { return moved[pid] >= p.Limit })
	}
	return out, err
}
