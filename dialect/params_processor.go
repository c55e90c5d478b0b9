// Params and results of the Dialect's operations, one file per group of
// the interface: Processor (engine.PoolStore): leases, row locks, batch reads,
// outcomes and the dead letters they write.

package dialect

import (
	"time"

	"github.com/uptrace/bun"
)

// ProcessorReadyListParams limits the poll to the partitions this process works.
type ProcessorReadyListParams struct {
	PartitionIDs []int64
}

// ProcessorLeaseParams asks for a lease of Duration for Owner and the next
// Limit messages.
type ProcessorLeaseParams struct {
	PartitionID int64
	Owner       string
	Duration    time.Duration
	Limit       int
}

// ProcessorLeaseResult is a taken lease and the batch read under it.
type ProcessorLeaseResult struct {
	Leased   bool
	State    ProcessorState
	Messages []OutgoingMessage
}

// ProcessorState is a partition's cursor and head-of-line failure count.
type ProcessorState struct {
	ProcessedSeq int64
	// Attempts counts earlier failed or abandoned deliveries of the head
	// message (the value before the lease taken now counted one more).
	Attempts int
}

// ProcessorAckLeaseParams is a clean ack and, in the same transaction, the
// next lease of the same partition.
type ProcessorAckLeaseParams struct {
	Ack  *ProcessorUpdateParams
	Next *ProcessorLeaseParams
}

// ProcessorLeaseGroupParams asks for several partitions' leases in one
// transaction: one commit for many lightly loaded partitions.
type ProcessorLeaseGroupParams struct {
	Leases []ProcessorLeaseParams // distinct partitions
}

// ProcessorAckLeaseGroupParams is several clean acks, each with its
// partition's next lease, in one transaction.
type ProcessorAckLeaseGroupParams struct {
	Items []ProcessorAckLeaseParams // distinct partitions, each Ack.Clean()
}

// ProcessorGroupResult is one item of a group: its lease (Leased false when
// nothing was taken) or ErrLeaseLost for an ack whose lease had expired.
// The other items of the group are not affected by a lost lease.
type ProcessorGroupResult struct {
	Lease ProcessorLeaseResult
	Err   error
}

// ProcessorLockParams names the partition to lock inside Conn.
type ProcessorLockParams struct {
	// Conn is the transaction that holds the row lock until it ends.
	Conn        bun.IConn
	PartitionID int64
}

// ProcessorLockResult is the locked row's state; Locked is false when the
// row is locked elsewhere, backing off, or has no work.
type ProcessorLockResult struct {
	Locked bool
	State  ProcessorState
}

// OutgoingListParams reads up to Limit rows with seq > AfterSeq on Conn.
type OutgoingListParams struct {
	Conn        bun.IConn
	PartitionID int64
	AfterSeq    int64
	Limit       int
}

// OutgoingMessage is one sequenced message with its body.
type OutgoingMessage struct {
	Seq int64
	ID  MessageID
	// Purged: a tombstone (Purge); the processor passes over it without
	// delivering it.
	Purged      bool
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte
	CreatedAt   time.Time
}

// DeadLetter is a self-contained copy of a message that will not be retried.
type DeadLetter struct {
	PartitionID int64
	Seq         int64
	MessageID   MessageID
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte
	CreatedAt   time.Time
	// LastError is stored as ErrorText renders it.
	LastError string
	Attempts  int
	// ID is the letter's row id (what seqbox.DeadLetters and `seqbox dlq
	// --id` select it by): zero until the operation that writes the letter
	// (ProcessorUpdate, ProcessorAck) sets it, in the params' own slice.
	ID int64
}

// ProcessorUpdateParams is the outcome of one batch. Build it with
// [ProcessorAdvance] or [ProcessorFailure].
type ProcessorUpdateParams struct {
	// Conn is the transaction to record on, for ProcessorUpdate;
	// ProcessorAck runs its own and ignores it.
	Conn        bun.IConn
	PartitionID int64
	// Owner guards the update with locked_by = Owner (leased mode); empty in
	// transactional mode, where the caller holds the row lock.
	Owner string
	// ProcessedSeq is the new cursor (unchanged if equal to the old one).
	ProcessedSeq int64
	// Attempts is the head's failure count to store.
	Attempts int
	// LastError is stored, as ErrorText renders it, when not empty; cleared otherwise.
	LastError string
	// RetryAfter sets next_attempt_at = now + RetryAfter when > 0.
	RetryAfter time.Duration
	// Park marks the partition parked (the Park failure policy): no
	// process leases it until an operator resumes or skips its head. Any
	// outcome without it clears the mark.
	Park bool
	// DeadLetters are inserted in the same transaction.
	DeadLetters []DeadLetter
	// ResolveReplays are acked messages that are replays of dead letters
	// (their own ids): those letters become resolved in the same transaction.
	ResolveReplays []MessageID
}

// ProcessorAdvance builds the update for acked messages: cursor to seq,
// attempts and error cleared, lease released.
func ProcessorAdvance(partitionID int64, owner string, seq int64, deadLetters []DeadLetter) *ProcessorUpdateParams {
	return &ProcessorUpdateParams{PartitionID: partitionID, Owner: owner, ProcessedSeq: seq, DeadLetters: deadLetters}
}

// ProcessorFailure builds the update for a failed head: cursor to seq (the
// acked prefix), attempts and error stored, retry after a delay, lease released.
func ProcessorFailure(partitionID int64, owner string, seq int64, attempts int, lastErr string, retryAfter time.Duration, deadLetters []DeadLetter) *ProcessorUpdateParams {
	return &ProcessorUpdateParams{
		PartitionID: partitionID, Owner: owner, ProcessedSeq: seq,
		Attempts: attempts, LastError: lastErr, RetryAfter: retryAfter, DeadLetters: deadLetters,
	}
}

// Clean reports an outcome that only advances the cursor: no failure, no
// dead letter (what ProcessorAckLease accepts).
func (p *ProcessorUpdateParams) Clean() bool {
	return p.Attempts == 0 && p.LastError == "" && p.RetryAfter == 0 && !p.Park && len(p.DeadLetters) == 0 && len(p.ResolveReplays) == 0
}
