package postgres

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// registerSQL creates a queue's rows. ON CONFLICT DO NOTHING makes a
// registration racing another one skip the rows that one wrote; kit's
// flow tells a count mismatch from the rows it inserted. A processor row
// is keyed (partition_id, version) (migration 015): a partition whose
// row has moved past version 0 would take a second row from a bare
// INSERT, so the insert skips the partitions that have one. Two
// registrations of a new queue never both get here with a snapshot older
// than the other's rows: the second waits on the first's partitions rows
// (InsertPartitions) and reads them in a later statement.
var registerSQL = kit.RegisterSQL{
	PartitionRows: kit.Inline(`SELECT id, partition_no FROM {partitions} WHERE queue = ?queue ORDER BY partition_no`),
	InsertPartitions: kit.Inline(`INSERT INTO {partitions} (queue, partition_no) VALUES ?rows ON CONFLICT DO NOTHING`,
		kit.Rows(`(?queue, ?no)`)),
	InsertProcessors: kit.Inline(`INSERT INTO {processor} (partition_id, version)
SELECT v.pid, 0 FROM (VALUES ?rows) AS v(pid)
WHERE NOT EXISTS (SELECT 1 FROM {processor} p WHERE p.partition_id = v.pid)
ON CONFLICT DO NOTHING`,
		kit.Rows(`(CAST(?pid AS bigint))`)),
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
