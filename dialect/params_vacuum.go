// Params and results of the Dialect's operations, one file per group of
// the interface: Vacuum (vacuum.Store): pruning processed rows and expired dedup
// keys, and vacuuming the tables.

package dialect

import "time"

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

// TableRotateParams asks for one round of the rotation of body and outgoing
// (docs/ROTATION.md) where the dialect rotates them.
type TableRotateParams struct {
	// Interval switches the current generation once it is older than this;
	// zero or less: never by age.
	Interval time.Duration
	// Size switches the current generation once its body and outgoing
	// partitions take more than this many bytes (indexes included); zero
	// or less: never by size.
	Size int64
	// Hold is how long the row-by-row prune pauses, in every process, after
	// a round that kept up. A pinned round ends the pause at once.
	Hold time.Duration
	// LockTimeout bounds the wait for a generation's tables before it is
	// truncated; a round that waits longer tries again next time.
	LockTimeout time.Duration
	// StallAfter: while the rotation is pinned, the prune stays held as
	// long as every partition with messages in the pinned generation has
	// acked some within the last StallAfter (a backlog draining: the
	// generation will be truncated once drained, and pruning it row by
	// row meanwhile only costs). Zero: a pinned round releases the prune
	// at once.
	StallAfter time.Duration
	// DrainLimit bounds what a draining generation may hold back: once the
	// current generation (which cannot switch while pinned, and is not
	// pruned while the prune is held) takes more than this many bytes,
	// the prune runs again, draining or not. Zero or less: no bound.
	DrainLimit int64
	// Now is the round's time, against which StallAfter is measured;
	// zero: the clock's.
	Now time.Time
}

// TableRotateResult is what one round did.
type TableRotateResult struct {
	// Current is the current generation after the round.
	Current int
	// Turn: this process had the turn (one process at a time rotates);
	// without it the round only read the current generation.
	Turn bool
	// Switched: the current generation was switched to the next.
	Switched bool
	// Truncated lists the generations truncated this round (a closed
	// generation that held no row is marked empty without one).
	Truncated []int
	// Refused lists the closed generations that could not be emptied yet.
	Refused []RotateRefusal
	// Pinned: a switch is due but the next generation is not empty yet (a
	// consumer far behind, a parked partition). The row-by-row prune then
	// runs, so that rotation never holds rows the prune would have
	// removed.
	Pinned bool
	// Draining: pinned, but every partition holding the pinned
	// generation's messages has acked some within StallAfter, so the prune
	// stays held (see TableRotateParams.StallAfter).
	Draining bool
}

// RotateRefusal is why a closed generation was not truncated.
type RotateRefusal struct {
	Gen    int
	Reason RotateReason
}

// RotateReason is why a closed generation was not truncated.
type RotateReason string

// The reasons a closed generation is not truncated.
const (
	// RotatePending: a message in it is not acked yet, or not moved yet.
	RotatePending RotateReason = "messages not acked"
	// RotateBusy: its tables stayed in use for longer than the lock
	// timeout (a transaction that reads or writes them is open).
	RotateBusy RotateReason = "tables in use"
)
