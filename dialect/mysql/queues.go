package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// registerSQL creates a queue's rows. INSERT IGNORE skips the rows that
// exist already: registration is idempotent, and two processes registering
// the same queue at once both succeed.
var registerSQL = kit.RegisterSQL{
	PartitionRows:        kit.Inline(`SELECT id, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	InsertPartitions:     kit.Inline(`INSERT IGNORE INTO {partitions} (queue, partition_no) VALUES ?rows`, kit.Rows(`(?queue, ?no)`)),
	InsertProcessors:     kit.Inline(`INSERT IGNORE INTO {processor} (partition_id) VALUES ?rows`, kit.Rows(`(?pid)`)),
	InsertVacuumCounters: kit.Inline(`INSERT IGNORE INTO {vacuum_counter} (partition_id) VALUES ?rows`, kit.Rows(`(?pid)`)),
	InsertStops:          kit.Inline(`INSERT IGNORE INTO {incoming} (id, partition_id, body_id, body_gen) ` + stopRows + ` WHERE p.queue = ?queue`),
}

// stopRows are the incoming stops (migration 012) of the partitions p
// the caller's WHERE picks: -2 * id and -2 * id - 1, never read as rows
// (every read of incoming is of ids above 0).
const stopRows = `SELECT -2 * p.id - s.n, p.id, UNHEX(REPEAT('00', 16)), -1
FROM {partitions} p CROSS JOIN (SELECT 0 AS n UNION ALL SELECT 1) s`

// The partition list, by the unique key (queue, partition_no). They are
// statements of statsSQL, the set of the read-only views.
var (
	partitionListSQL      = kit.Inline(`SELECT id, queue, partition_no FROM {partitions} ORDER BY queue, partition_no`)
	partitionListQueueSQL = kit.Inline(`SELECT id, queue, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`)
)

// QueueRegister creates the queues' rows if missing, in one transaction.
func (d *mysqlDialect) QueueRegister(ctx context.Context, p *dialect.QueueRegisterParams) ([][]int64, error) {
	return registerSQL.Register(ctx, d.Runner, p)
}

// PartitionList names the partitions of one queue, or of all.
func (d *mysqlDialect) PartitionList(ctx context.Context, p *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	return statsSQL.PartitionNames(ctx, d.Runner, p)
}
