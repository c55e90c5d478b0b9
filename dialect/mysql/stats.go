package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// statsSQL is the read-only views: stats, the partition list (queues.go),
// parked and retrying partitions.
var statsSQL = kit.StatsSQL{
	// Each figure is found through an index. The oldest sequenced message
	// is the head of the sequenced line, by primary key (seqs are gap-free
	// above processed_seq); the last seq handed out is the partition's last
	// outgoing entry when the head exists, else the cursor (see Tops in
	// sequencer.go); the oldest incoming one is the head of the line, the
	// first row by id: MIN(created_at) over the join would read every row
	// of a backlog (BENCHMARKS.md, "Figures behind design choices", "Oldest
	// message by index"). Both incoming figures skip the stops (id > 0;
	// migration 012) on the (partition_id, id) index, forced: with the
	// ORDER BY id, the optimizer may otherwise walk the primary key.
	PartitionStats: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts,
` + lastSeq("pa.id", "pr.processed_seq") + ` AS sequence,
pr.last_error, pr.locked_until, pr.next_attempt_at, pr.parked_at,
COALESCE((SELECT b.created_at FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1),
 (SELECT b.created_at FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1),
 (SELECT b.created_at FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1)) AS oldest_outgoing,
(SELECT COUNT(*) FROM {incoming} i FORCE INDEX ({incoming}_partition_id) WHERE i.partition_id = pa.id AND i.id > 0) AS incoming,
(SELECT ` + incomingBody("created_at") + `
 FROM {incoming} i FORCE INDEX ({incoming}_partition_id) WHERE i.partition_id = pa.id AND i.id > 0 ORDER BY i.id LIMIT 1) AS oldest_incoming
FROM {partitions} pa JOIN {processor} pr ON pr.partition_id = pa.id
WHERE ?pid = 0 OR pa.id = ?pid ORDER BY pa.queue, pa.partition_no`),
	DeadLetterCount: kit.Inline(`SELECT partition_id, status, COUNT(*) AS n FROM {dead_letters}
WHERE ?pid = 0 OR partition_id = ?pid GROUP BY partition_id, status`),
	PartitionList:      partitionListSQL,
	PartitionListQueue: partitionListQueueSQL,
	// What an operator may act on (seqbox.Partitions): parked, or a failed
	// head waiting for its retry. leased is a lease not expired by the
	// database clock (a delivery may be in flight): the complement of the
	// leasable lease condition.
	FailingList: kit.Inline(`SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts, pr.last_error,
pr.next_attempt_at, pr.parked_at,
CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until >= UTC_TIMESTAMP(6) THEN 1 ELSE 0 END AS leased
FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id
WHERE pr.parked_at IS NOT NULL OR pr.next_attempt_at IS NOT NULL OR COALESCE(pr.last_error, '') <> ''
ORDER BY pa.queue, pa.partition_no`),
	AdminRead: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
CASE WHEN locked_until IS NOT NULL AND locked_until >= UTC_TIMESTAMP(6) THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE partition_id = ?pid`),
	// The lock waits: an operator's action queues behind another's, then
	// sees the row as that one left it.
	AdminLock: kit.Inline(`SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at,
CASE WHEN locked_until IS NOT NULL AND locked_until >= UTC_TIMESTAMP(6) THEN 1 ELSE 0 END AS leased
FROM {processor} WHERE partition_id = ?pid FOR UPDATE`),
}

// PartitionStats reads every partition's figures.
func (d *mysqlDialect) PartitionStats(ctx context.Context, p *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	return statsSQL.Partitions(ctx, d.Runner, d.DB(), p.PartitionID)
}

// DeadLetterCount counts dead letters by partition and status.
func (d *mysqlDialect) DeadLetterCount(ctx context.Context, p *dialect.DeadLetterCountParams) ([]dialect.DeadLetterCount, error) {
	return statsSQL.DeadLetters(ctx, d.Runner, p.PartitionID)
}

// ProcessorFailingList lists the parked and retrying partitions.
func (d *mysqlDialect) ProcessorFailingList(ctx context.Context, _ *dialect.ProcessorFailingListParams) ([]dialect.ProcessorAdminState, error) {
	return statsSQL.Failing(ctx, d.Runner)
}

// ProcessorAdminRead reads (and with p.Lock locks, in p.Conn) one
// partition's processor row.
func (d *mysqlDialect) ProcessorAdminRead(ctx context.Context, p *dialect.ProcessorAdminReadParams) (dialect.ProcessorAdminReadResult, error) {
	return statsSQL.Admin(ctx, d.Runner, p)
}
