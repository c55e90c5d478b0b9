// Params and results of the Dialect's operations, one file per group of
// the interface: Sequencer (sequencer.Store): the reconciler's list and the moves.

package dialect

// IncomingPartitionListParams asks for every partition with incoming rows.
type IncomingPartitionListParams struct{}

// SequenceMoveParams selects the partition and the batch size.
type SequenceMoveParams struct {
	PartitionID int64
	Limit       int
}

// SequenceMoveManyParams selects several partitions to move in one
// transaction, up to Limit rows each.
type SequenceMoveManyParams struct {
	PartitionIDs []int64
	Limit        int
}

// SequenceMoveResult tells what one sequencer transaction did to a partition.
type SequenceMoveResult struct {
	PartitionID int64
	// Skipped: the partition row is locked by another sequencer.
	Skipped bool
	// Moved rows got seqs FirstSeq..LastSeq.
	Moved    int
	FirstSeq int64
	LastSeq  int64
}
