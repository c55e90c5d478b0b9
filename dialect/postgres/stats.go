package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// statsSQL is the read-only views. Bodies are probed by primary key from
// the row (see OutgoingList in processor.go); incoming rows are counted
// from each partition's lower bound (see sequencer.go): rows below it are
// moved, whether a vacuum removed them yet or not.
var statsSQL = kit.StatsSQL{
	// The head of the sequenced line by primary key (seqs are gap-free
	// above processed_seq), the last seq handed out as the last one above
	// it by the primary key backwards (or the cursor: see sequencer.go),
	// and the head of the incoming line through the index in the moves'
	// order: MIN(created_at) over the join read every row of a backlog,
	// dead rows included (BENCHMARKS.md, "Figures behind design choices",
	// "Oldest message by index").
	PartitionStats: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts,
	COALESCE((SELECT o.seq FROM {outgoing} o WHERE o.partition_id = pa.id AND o.seq > pr.processed_seq
		ORDER BY o.seq DESC LIMIT 1), pr.processed_seq) AS sequence,
	pr.last_error, pr.locked_until, pr.next_attempt_at, pr.parked_at,
	(SELECT b.created_at FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
		WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1) AS oldest_outgoing,
	(SELECT COUNT(*) FROM {incoming} i WHERE i.partition_id = pa.id AND i.xid >= ` + partitionBound + `) AS incoming,
	(SELECT b.created_at FROM {incoming} i CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = i.body_id AND gen = i.body_gen LIMIT 1) b
		WHERE i.partition_id = pa.id AND i.xid >= ` + partitionBound + ` ORDER BY i.xid, i.id LIMIT 1) AS oldest_incoming
FROM {partitions} pa CROSS JOIN ` + currentRow("pa.id", "pr") + `
WHERE ?pid = 0 OR pa.id = ?pid
ORDER BY pa.queue, pa.partition_no`),
	DeadLetterCount: kit.Inline(`SELECT partition_id, status, COUNT(*) AS n FROM {dead_letters}
WHERE ?pid = 0 OR partition_id = ?pid GROUP BY partition_id, status`),
	PartitionList:      kit.Inline(`SELECT id, queue, partition_no FROM {partitions} ORDER BY queue, partition_no`),
	PartitionListQueue: kit.Inline(`SELECT id, queue, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	// What an operator may act on: parked, or a failed head waiting for its
	// retry. leased is a lease not expired by the database clock (a
	// delivery may be in flight): the complement of leasable's lease
	// condition.
	FailingList: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts, pr.last_error,
	pr.next_attempt_at, pr.parked_at,
	CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until >= now() THEN 1 ELSE 0 END AS leased
FROM {partitions} pa CROSS JOIN ` + currentRow("pa.id", "pr") + `
WHERE pr.parked_at IS NOT NULL OR pr.next_attempt_at IS NOT NULL OR COALESCE(pr.last_error, '') <> ''
ORDER BY pa.queue, pa.partition_no`),
	AdminRead: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
	CASE WHEN locked_until IS NOT NULL AND locked_until >= now() THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE partition_id = ?pid ORDER BY version DESC LIMIT 1`),
	// The lock waits: an operator's action queues behind another's, then
	// sees the row as that one left it.
	AdminLock: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
	CASE WHEN locked_until IS NOT NULL AND locked_until >= now() THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE ` + currentParam + ` FOR NO KEY UPDATE`),
}

// statsSettings is the settings PartitionStats runs under.
type statsSettings struct {
	// JITOff turns JIT off for the rest of the transaction: the planner,
	// with no statistics on the tiny partitions table, assumes thousands of
	// rows and JIT-compiles the per-partition subqueries, which costs far
	// more than the query's run (BENCHMARKS.md, "Figures behind design
	// choices", "PostgreSQL stats with JIT off"). set_config(…, true)
	// lasts until the transaction ends; it runs first because a statement
	// is planned before any of it runs.
	JITOff *kit.Stmt
}

var statsSettingsSQL = statsSettings{
	JITOff: kit.Inline(`SELECT set_config('jit', 'off', true)`),
}

// PartitionStats reads every partition's backlog figures, with JIT off.
func (d *pgDialect) PartitionStats(ctx context.Context, p *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	var out []dialect.PartitionStats
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Exec(ctx, tx, statsSettingsSQL.JITOff, nil); err != nil {
			return err
		}
		var err error
		out, err = statsSQL.Partitions(ctx, d.Runner, tx, p.PartitionID)
		return err
	})
	return out, err
}

// DeadLetterCount counts dead letters by partition and status.
func (d *pgDialect) DeadLetterCount(ctx context.Context, p *dialect.DeadLetterCountParams) ([]dialect.DeadLetterCount, error) {
	return statsSQL.DeadLetters(ctx, d.Runner, p.PartitionID)
}

// ProcessorFailingList lists the parked and retrying partitions.
func (d *pgDialect) ProcessorFailingList(ctx context.Context, _ *dialect.ProcessorFailingListParams) ([]dialect.ProcessorAdminState, error) {
	return statsSQL.Failing(ctx, d.Runner)
}

// ProcessorAdminRead reads (and with p.Lock locks, in p.Conn) one
// partition's processor row.
func (d *pgDialect) ProcessorAdminRead(ctx context.Context, p *dialect.ProcessorAdminReadParams) (dialect.ProcessorAdminReadResult, error) {
	return statsSQL.Admin(ctx, d.Runner, p)
}
