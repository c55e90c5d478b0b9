package postgres

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// registerSQL creates a queue's rows. ON CONFLICT DO NOTHING makes a
// registration racing another one skip the rows that one wrote; kit's
// flow tells a count mismatch from the rows it inserted.
var registerSQL = kit.RegisterSQL{
	PartitionRows: kit.Inline(`SELECT id, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	InsertPartitions: kit.Inline(`INSERT INTO {partitions} (queue, partition_no) VALUES ?rows ON CONFLICT DO NOTHING`,
		kit.Rows(`(?queue, ?no)`)),
	InsertProcessors: kit.Inline(`INSERT INTO {processor} (partition_id) VALUES ?rows ON CONFLICT DO NOTHING`,
		kit.Rows(`(?pid)`)),
	InsertVacuumCounters: kit.Inline(`INSERT INTO {vacuum_counter} (partition_id) VALUES ?rows ON CONFLICT DO NOTHING`,
		kit.Rows(`(?pid)`)),
}

// QueueRegister creates the queues' rows if missing, all in one
// transaction; see dialect.Dialect.
func (d *pgDialect) QueueRegister(ctx context.Context, p *dialect.QueueRegisterParams) ([][]int64, error) {
	return registerSQL.Register(ctx, d.Runner, p)
}

// PartitionList names the partitions of one queue, or of all; its
// statements are StatsSQL's (stats.go).
func (d *pgDialect) PartitionList(ctx context.Context, p *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	return statsSQL.PartitionNames(ctx, d.Runner, p)
}
