// Params and results of the Dialect's operations, one file per group of
// the interface: Stats (the engine, Admin): per-partition backlog figures and dead
// letter counts.

package dialect

import (
	"time"
)

// PartitionStatsParams asks for every registered partition, or for one.
type PartitionStatsParams struct {
	PartitionID int64 // 0: every partition
}

// PartitionStats are one partition's backlog figures.
type PartitionStats struct {
	PartitionID int64
	Queue       string
	Partition   int
	Incoming    int64
	// Sequence is the last seq handed out: the top of the partition's
	// outgoing rows, or ProcessedSeq once the vacuum has pruned them all.
	Sequence     int64
	ProcessedSeq int64
	Attempts     int
	LastError    string
	// OldestIncoming is when the first unsequenced message in line (lowest
	// incoming id) was enqueued.
	OldestIncoming time.Time
	// OldestOutgoing is when the head of the sequenced line (seq
	// ProcessedSeq+1) was enqueued; zero when nothing waits there.
	OldestOutgoing time.Time
	LockedUntil    time.Time
	NextAttemptAt  time.Time
	// ParkedAt is when the partition was parked; zero when it is not.
	ParkedAt time.Time
}

// DeadLetterCountParams asks for every partition's counts, or for one's.
type DeadLetterCountParams struct {
	PartitionID int64 // 0: every partition
}

// DeadLetterCount is the number of dead letters of a partition in a status.
type DeadLetterCount struct {
	PartitionID int64
	Status      string
	Count       int64
}
