package dialect

import (
	"time"

	"github.com/uptrace/bun"
)

// Params and results of the Dialect's operations, in the interface's order.

// SchemaMigrateParams asks for the schema to be brought up to date.
type SchemaMigrateParams struct{}

// SchemaStatusParams asks which schema version the database is at.
type SchemaStatusParams struct{}

// SchemaStatus is the database's schema version and the latest this
// release knows; Current is 0 when no seqbox table exists yet.
type SchemaStatus struct {
	Current, Latest int
}

// SchemaDropParams asks for every table of the prefix to be dropped.
type SchemaDropParams struct{}

// QueueRegisterParams lists the queues to register, all or none.
type QueueRegisterParams struct {
	Queues []QueueDef
}

// QueueDef names a queue and its fixed partition count.
type QueueDef struct {
	Queue      string
	Partitions int
}

// MessageRow is one validated message ready to insert.
type MessageRow struct {
	ID          MessageID
	PartitionID int64
	// Key is the message's key, stored with it ("" is none).
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte // JSON object text, or nil
}

// MessageInsertManyParams is one enqueue: its rows, in order, and the
// bounds of one statement; the dialect splits the rows into chunks.
type MessageInsertManyParams struct {
	// Conn is the caller's connection or transaction.
	Conn bun.IConn
	Rows []MessageRow
	// ChunkRows and ChunkBytes bound one multi-row statement: its rows and
	// the size of its SQL text as the dialect estimates it.
	ChunkRows, ChunkBytes int
}

// DedupClaimParams claims dedup keys of one queue for an enqueue.
type DedupClaimParams struct {
	// Conn is the caller's connection or transaction.
	Conn  bun.IConn
	Queue string
	// Window is how long a new claim lasts.
	Window time.Duration
	// Claims have distinct keys.
	Claims []DedupClaim
}

// DedupClaim is one message's claim of its dedup key.
type DedupClaim struct {
	Key string
	ID  MessageID
}

// PurgeParams purges one partition's messages whose headers match
// (docs/ARCHITECTURE.md, "Purge").
type PurgeParams struct {
	PartitionID int64
	// Headers must all match; at least one.
	Headers []Header
	// Limit bounds the rows one call takes from each stage.
	Limit int
	// LeaseWindow: while the partition's lease is live, the seqs up to its
	// cursor plus the lease's batch limit may be in the batch being
	// delivered, and are left to that delivery (counted as InFlight);
	// LeaseWindow is that limit for a lease that did not record one.
	LeaseWindow int
	// DryRun counts what a purge would take, changing nothing.
	DryRun bool
}

// Header is one header name and value.
type Header struct{ Key, Value string }

// PurgeResult is what one PurgePartition call did.
type PurgeResult struct {
	// Incoming messages (not sequenced yet) were deleted.
	Incoming int
	// Outgoing messages (sequenced, not yet delivered) became tombstones.
	Outgoing int
	// InFlight matching messages may be in a batch being delivered now.
	InFlight int
	// More: a stage reached Limit; call again.
	More bool
}

// DedupExpireParams bounds one prune of expired dedup keys.
type DedupExpireParams struct {
	Limit int
}

// MessagePendingListParams are the message ids to look up.
type MessagePendingListParams struct {
	IDs []MessageID
}

// IncomingPartitionListParams asks for every partition with incoming rows.
type IncomingPartitionListParams struct{}

// SequenceMoveParams selects the partition and the batch size.
type SequenceMoveParams struct {
	PartitionID int64
	Limit       int
	// Backlog: the previous move of this partition was full, so this one
	// probably is too. A dialect may pick a shape that pays off only for
	// large batches.
	Backlog bool
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

// Dead-letter states (deadletter.Status): written pending; a replay makes
// it replayed and the replay's ack resolved; an operator may resolve or
// discard a pending one.
const (
	DeadLetterPending   = "pending"
	DeadLetterReplayed  = "replayed"
	DeadLetterResolved  = "resolved"
	DeadLetterDiscarded = "discarded"
)

// DeadLetterFilter selects dead letters: every set field must match.
type DeadLetterFilter struct {
	IDs []int64 // nil: any; empty: none
	// PartitionIDs: nil matches any partition, an empty list none (a
	// queue or partition that does not exist).
	PartitionIDs []int64
	Statuses     []string
	PayloadType  string
	MessageID    *MessageID
	FailedFrom   time.Time // inclusive; zero: unbounded
	FailedTo     time.Time // exclusive; zero: unbounded
	CompletedTo  time.Time // completed_at before it (purge); zero: unbounded
}

// DeadLetterListParams lists dead letters in id order.
type DeadLetterListParams struct {
	// Conn is the connection to read on; nil reads on the database. With
	// Lock it is the transaction that holds the rows' locks until it ends.
	Conn    bun.IConn
	Filter  DeadLetterFilter
	AfterID int64 // keyset pagination: ids above it
	Limit   int   // 0: no limit
	Lock    bool
	// IDsOnly reads only ids and statuses (bulk actions, purge).
	IDsOnly bool
}

// DeadLetterRecord is a stored dead letter.
type DeadLetterRecord struct {
	ID          int64
	PartitionID int64
	Seq         int64
	MessageID   MessageID
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte // JSON object text, or nil
	CreatedAt   time.Time
	FailedAt    time.Time
	LastError   string
	Attempts    int
	Status      string
	Note        string
	CompletedAt *time.Time
	ReplayID    *MessageID
}

// DeadLetterTallyParams counts the dead letters a filter matches, by status.
type DeadLetterTallyParams struct {
	Filter DeadLetterFilter
}

// DeadLetterUpdateParams moves letters from one status to another on
// Conn, only those still in From: of two operators, one wins.
type DeadLetterUpdateParams struct {
	Conn bun.IConn
	IDs  []int64
	From string
	To   string
	Note string // stored when not empty
	// ReplayIDs, parallel to IDs, are the replay copies' ids (To replayed).
	ReplayIDs []MessageID
}

// DeadLetterDeleteParams deletes letters by id on Conn (purge).
type DeadLetterDeleteParams struct {
	Conn bun.IConn
	IDs  []int64
}

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

// PartitionStatsParams asks for every registered partition.
type PartitionStatsParams struct{}

// PartitionStats are one partition's backlog figures.
type PartitionStats struct {
	PartitionID  int64
	Queue        string
	Partition    int
	Incoming     int64
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

// DeadLetterCountParams asks for every partition's counts.
type DeadLetterCountParams struct{}

// DeadLetterCount is the number of dead letters of a partition in a status.
type DeadLetterCount struct {
	PartitionID int64
	Status      string
	Count       int64
}
