package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// statsSQL is the read-only views. "Leased" is a lease not expired by the
// database clock (a delivery may be in flight): the complement of the
// lease condition of the processor's leasable rows.
var statsSQL = kit.StatsSQL{
	// The head of the sequenced line by primary key (seqs are gap-free
	// above processed_seq), probed in each generation, the last seq handed
	// out as the last one above it in any generation (or the cursor: see
	// Tops in sequencer.go), and the head of the incoming line through the
	// index, its body in the generation it names: MIN(created_at) over the
	// join reads every row of a backlog (BENCHMARKS.md, "Figures behind
	// design choices", "Oldest message by index").
	PartitionStats: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts,
` + lastSeq("pa.id", "pr.processed_seq") + ` AS sequence,
pr.last_error, pr.locked_until, pr.next_attempt_at, pr.parked_at,
COALESCE((SELECT b.created_at FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1),
 (SELECT b.created_at FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1),
 (SELECT b.created_at FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1)) AS oldest_outgoing,
(SELECT COUNT(*) FROM {incoming} i WHERE i.partition_id = pa.id) AS incoming,
(SELECT ` + incomingBody("created_at") + `
 FROM {incoming} i WHERE i.partition_id = pa.id ORDER BY i.id LIMIT 1) AS oldest_incoming
FROM {partitions} pa JOIN {processor} pr ON pr.partition_id = pa.id
WHERE ?pid = 0 OR pa.id = ?pid ORDER BY pa.queue, pa.partition_no`),
	DeadLetterCount: kit.Inline(`SELECT partition_id, status, COUNT(*) AS n FROM {dead_letters}
WHERE ?pid = 0 OR partition_id = ?pid GROUP BY partition_id, status`),
	PartitionList:      kit.Inline(`SELECT id, queue, partition_no FROM {partitions} ORDER BY queue, partition_no`),
	PartitionListQueue: kit.Inline(`SELECT id, queue, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	// What an operator may act on (seqbox.Partitions): parked, or a failed
	// head waiting for its retry.
	FailingList: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts, pr.last_error,
pr.next_attempt_at, pr.parked_at,
CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until >= strftime('%Y-%m-%d %H:%M:%f', 'now') THEN 1 ELSE 0 END AS leased
FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id
WHERE pr.parked_at IS NOT NULL OR pr.next_attempt_at IS NOT NULL OR COALESCE(pr.last_error, '') <> ''
ORDER BY pa.queue, pa.partition_no`),
	// No row lock to wait for: an operator's transaction holds the write
	// lock from its start, so it sees the row as the last writer left it.
	AdminRead: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
CASE WHEN locked_until IS NOT NULL AND locked_until >= strftime('%Y-%m-%d %H:%M:%f', 'now') THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE partition_id = ?pid`),
	AdminLock: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
CASE WHEN locked_until IS NOT NULL AND locked_until >= strftime('%Y-%m-%d %H:%M:%f', 'now') THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE partition_id = ?pid`),
}

// PartitionStats reads every partition's figures.
func (d *sqliteDialect) PartitionStats(ctx context.Context, p *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	return statsSQL.Partitions(ctx, d.Runner, d.DB(), p.PartitionID)
}

// DeadLetterCount counts dead letters by partition and status.
func (d *sqliteDialect) DeadLetterCount(ctx context.Context, p *dialect.DeadLetterCountParams) ([]dialect.DeadLetterCount, error) {
	return statsSQL.DeadLetters(ctx, d.Runner, p.PartitionID)
}

// ProcessorFailingList lists the parked and retrying partitions.
func (d *sqliteDialect) ProcessorFailingList(ctx context.Context, _ *dialect.ProcessorFailingListParams) ([]dialect.ProcessorAdminState, error) {
	return statsSQL.Failing(ctx, d.Runner)
}

// ProcessorAdminRead reads one partition's processor row on p.Conn.
func (d *sqliteDialect) ProcessorAdminRead(ctx context.Context, p *dialect.ProcessorAdminReadParams) (dialect.ProcessorAdminReadResult, error) {
	return statsSQL.Admin(ctx, d.Runner, p)
}
