// Params and results of the Dialect's operations, one file per group of
// the interface: Partitions as operators see them (seqbox.Partitions, and the
// partition list the dead-letter actions use): names, parked and retrying
// heads.

package dialect

import (
	"time"

	"github.com/uptrace/bun"
)

// PartitionListParams lists the partitions of Queue, or of every queue.
type PartitionListParams struct {
	Queue string
}

// PartitionInfo names a partition.
type PartitionInfo struct {
	ID        int64
	Queue     string
	Partition int
}

// ProcessorFailingListParams asks for every partition an operator may
// act on: parked, or retrying a head that failed.
type ProcessorFailingListParams struct{}

// ProcessorAdminReadParams reads one partition's processor row for an
// operator's action: on Conn, or on the database when Conn is nil. With
// Lock the row is locked in Conn (a transaction) until it ends, waiting
// for another transaction that holds it.
type ProcessorAdminReadParams struct {
	Conn        bun.IConn
	PartitionID int64
	Lock        bool
}

// ProcessorAdminState is a partition's head-of-line state as an operator
// sees it: its cursor (the head is seq ProcessedSeq+1), the head's
// failures, and whether a delivery may be in flight.
type ProcessorAdminState struct {
	// PartitionInfo is left empty by ProcessorAdminRead.
	PartitionInfo
	ProcessedSeq int64
	Attempts     int
	LastError    string
	// NextAttemptAt is when a failed head is retried; zero when no retry
	// is pending.
	NextAttemptAt time.Time
	// ParkedAt is when the partition was parked; zero when it is not.
	ParkedAt time.Time
	// Leased: a lease has not expired yet by the database clock, so a
	// delivery of the head may be in flight.
	Leased bool
}

// ProcessorAdminReadResult is the row ProcessorAdminRead read; Found is
// false when the partition has no processor row.
type ProcessorAdminReadResult struct {
	Found bool
	State ProcessorAdminState
}
