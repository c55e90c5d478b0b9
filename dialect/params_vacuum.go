// Params and results of the Dialect's operations, one file per group of
// the interface: Vacuum (vacuum.Store): pruning processed rows and expired dedup
// keys, and vacuuming the tables.

package dialect

// DedupExpireParams bounds one prune of expired dedup keys.
type DedupExpireParams struct {
	Limit int
}

// VacuumCounterListParams asks for every partition with rows to prune.
type VacuumCounterListParams struct{}

// VacuumCounter is a partition with processed rows to prune: those with
// PrunedSeq < seq <= ProcessedSeq.
type VacuumCounter struct {
	PartitionID  int64
	PrunedSeq    int64
	ProcessedSeq int64
}

// VacuumDeleteParams selects processed rows of one or more partitions,
// pruned in one transaction.
type VacuumDeleteParams struct {
	Ranges []VacuumRange
}

// VacuumRange is one partition's rows with FromSeq < seq <= ToSeq.
type VacuumRange struct {
	PartitionID int64
	FromSeq     int64 // exclusive
	ToSeq       int64 // inclusive
}

// TableVacuumParams asks for seqbox's own tables to be vacuumed if the
// database needs it done.
type TableVacuumParams struct{}

// TableVacuumResult says whether the tables were vacuumed, and why not.
type TableVacuumResult struct {
	Vacuumed bool
	// Reason is why nothing was done: autovacuum is on, or another process
	// holds the turn.
	Reason string
}
