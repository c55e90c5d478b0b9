package sqlite

import (
	"context"
	"strconv"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// moveSQL is the move as several simple statements in one transaction.
// The reads take no row locks: every outbox transaction holds the write
// lock from its first statement (beginWrite), which serialises the
// sequencers, and rows of still-open producers are invisible here; they
// get later seqs.
var moveSQL = kit.MoveSQL{
	LockPartition:  kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid`),
	SelectIncoming: kit.Inline(`SELECT id, body_id, body_gen FROM {incoming} WHERE partition_id = ?pid ORDER BY id LIMIT ?limit`),
	// The last seq above the cursor in any generation, by each one's
	// primary key backwards, or the cursor when there is none (the vacuum
	// pruned, or a truncation removed, everything up to it): lastSeq.
	Tops: kit.Inline(`SELECT pr.partition_id, ` + lastSeq("pr.partition_id", "pr.processed_seq") + ` AS top
FROM {processor} pr WHERE pr.partition_id IN (?pids)`),
	LockPartitions: kit.Inline(`SELECT id FROM {partitions} WHERE id IN (?pids) ORDER BY id`),
	// Every partition's head of line in one statement of fixed text: each
	// partition's rows by index up to the id at ?offset in it (CROSS JOIN
	// keeps json_each the outer side).
	SelectHeads: kit.Prepare(`SELECT i.partition_id, i.id, i.body_id, i.body_gen
FROM json_each(?pids) p CROSS JOIN {incoming} i
WHERE i.partition_id = p.value AND i.id <= COALESCE((SELECT x.id FROM {incoming} x
	WHERE x.partition_id = p.value ORDER BY x.id LIMIT 1 OFFSET ?offset), 9223372036854775807)`),
	Write: kit.WriteSQL{
		// Into the generation of the rows' bodies (rotate.go), prepared in
		// pieces like the enqueue's INSERTs (enqueue.go).
		InsertOutgoingGen: kit.PerGeneration(func(g int) *kit.Stmt {
			return kit.PrepareRows(`INSERT INTO {outgoing_g`+strconv.Itoa(g)+`} (partition_id, seq, body_id, sequenced_at) VALUES ?rows`,
				kit.Rows(`(?pid, ?seq, ?body_id, strftime('%Y-%m-%d %H:%M:%f', 'now'))`))
		}),
		// By exact id: a range would also delete a row with a smaller id
		// that committed meanwhile, and lose that message. Readers never
		// wait on rows of open producers here (no MVCC row locks). The ids
		// are one JSON array, so the text is the same for any number.
		DeleteIncoming: kit.Prepare(`DELETE FROM {incoming} WHERE id IN (SELECT value FROM json_each(?moved))`),
		DeleteArg:      func(rows []kit.MovedRow) any { return kit.JSONArray(kit.IncomingIDs(rows)) },
	},
}

// sequencerStmts are the sequencer's other reads.
type sequencerStmts struct {
	// IncomingPartitions lists the partitions with incoming rows: one
	// index probe per partition, where DISTINCT over incoming would read
	// the whole backlog.
	IncomingPartitions *kit.Stmt
}

var sequencerSQL = sequencerStmts{
	IncomingPartitions: kit.Inline(`SELECT pa.id FROM {partitions} pa WHERE EXISTS (SELECT 1 FROM {incoming} i WHERE i.partition_id = pa.id)`),
}

// IncomingPartitionList lists partitions with unsequenced rows.
func (d *sqliteDialect) IncomingPartitionList(ctx context.Context, _ *dialect.IncomingPartitionListParams) ([]int64, error) {
	return kit.ReadIDs(ctx, d.Runner, sequencerSQL.IncomingPartitions, nil)
}

// SequenceMove moves one batch with several simple statements.
func (d *sqliteDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return moveSQL.Move(ctx, d.Runner, p, nil)
}

// SequenceMoveMany moves several partitions in one transaction of five
// statements.
func (d *sqliteDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	return moveSQL.MoveMany(ctx, d.Runner, p, nil)
}
