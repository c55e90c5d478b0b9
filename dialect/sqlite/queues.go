package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// registerSQL creates a queue's rows. INSERT OR IGNORE skips the rows
// that exist: a registration racing another one inserts only what is
// missing, and the count of rows it inserted tells a conflicting
// partition count.
var registerSQL = kit.RegisterSQL{
	PartitionRows: kit.Inline(`SELECT id, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	InsertPartitions: kit.Inline(`INSERT OR IGNORE INTO {partitions} (queue, partition_no) VALUES ?rows`,
		kit.Rows(`(?queue, ?no)`)),
	InsertProcessors: kit.Inline(`INSERT OR IGNORE INTO {processor} (partition_id) VALUES ?rows`,
		kit.Rows(`(?pid)`)),
	InsertVacuumCounters: kit.Inline(`INSERT OR IGNORE INTO {vacuum_counter} (partition_id) VALUES ?rows`,
		kit.Rows(`(?pid)`)),
}

// QueueRegister creates the queues' rows if missing, in one transaction.
func (d *sqliteDialect) QueueRegister(ctx context.Context, p *dialect.QueueRegisterParams) ([][]int64, error) {
	return registerSQL.Register(ctx, d.Runner, p)
}

// PartitionList names the partitions of one queue, or of all (statements
// in stats.go's statsSQL).
func (d *sqliteDialect) PartitionList(ctx context.Context, p *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	return statsSQL.PartitionNames(ctx, d.Runner, p)
}
