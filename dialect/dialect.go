// Package dialect is the only place in seqbox that knows SQL. It defines one
// interface, [Dialect], with one method per database operation, and three
// implementations: dialect/postgres, dialect/mysql (MySQL 8.0.4+ and
// MariaDB 10.6+) and dialect/sqlite.
//
// The interface is not stable before seqbox v1: it may gain methods in any
// release, so code outside seqbox must not implement it. Import the
// implementations only to pass them to seqbox, or let seqbox pick one from
// the *bun.DB it is given.
//
// No dialect imports a database driver: the application opens the *sql.DB
// with the driver of its choice and wraps it in a *bun.DB.
package dialect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Name identifies a database family.
type Name int

// The database families seqbox supports. The zero value is invalid.
const (
	Invalid Name = iota
	Postgres
	MySQL
	SQLite
)

func (n Name) String() string {
	switch n {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	default:
		return "invalid"
	}
}

// Feature is a bitset of capabilities a dialect has.
type Feature uint64

// Capabilities. Tests skip with a reason when one is missing.
const (
	// RowLocks: SELECT … FOR UPDATE SKIP LOCKED exists, so several processes
	// can share the database. Without it (SQLite) one process owns the outbox.
	RowLocks Feature = 1 << iota
	// SingleWriter: the database serialises writers; the dialect routes the
	// outbox's own writes through one in-process writer.
	SingleWriter
)

// Has reports whether every bit of want is set.
func (f Feature) Has(want Feature) bool { return f&want == want }

// Errors every dialect maps its driver errors onto, matched with errors.Is.
var (
	// ErrRetryable marks a transient conflict (serialization failure,
	// deadlock, SQLITE_BUSY): the operation may be retried at once.
	ErrRetryable = errors.New("seqbox: retryable database conflict")
	// ErrNotSupported is returned for an operation a dialect cannot do.
	ErrNotSupported = errors.New("seqbox: operation not supported by this database")
	// ErrInvalidPrefix is returned for a table prefix that is not a safe identifier.
	ErrInvalidPrefix = errors.New("seqbox: invalid table prefix")
	// ErrLeaseLost is returned by a guarded processor update when another
	// owner holds the partition now.
	ErrLeaseLost = errors.New("seqbox: processor lease lost")
)

// DefaultPrefix is the table prefix used when none is configured.
const DefaultPrefix = "seqbox_"

// ValidatePrefix checks a table prefix once, so that identifiers built from
// it never need quoting tricks: 1..32 characters of [a-z0-9_], starting with
// a letter or underscore.
func ValidatePrefix(prefix string) error {
	if len(prefix) == 0 || len(prefix) > 32 {
		return fmt.Errorf("%w %q: length must be 1..32", ErrInvalidPrefix, prefix)
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return fmt.Errorf("%w %q: use lower-case letters, digits and '_', not starting with a digit", ErrInvalidPrefix, prefix)
		}
	}
	return nil
}

// Tables holds the full table names for one prefix.
type Tables struct {
	Prefix        string
	Partitions    string
	Body          string
	Incoming      string
	Outgoing      string
	Processor     string
	VacuumCounter string
	DeadLetters   string
	SchemaVersion string
}

// NewTables derives the table names from a validated prefix.
func NewTables(prefix string) (Tables, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Tables{}, err
	}
	return Tables{
		Prefix:        prefix,
		Partitions:    prefix + "partitions",
		Body:          prefix + "body",
		Incoming:      prefix + "incoming",
		Outgoing:      prefix + "outgoing",
		Processor:     prefix + "processor",
		VacuumCounter: prefix + "vacuum_counter",
		DeadLetters:   prefix + "dead_letters",
		SchemaVersion: prefix + "schema_version",
	}, nil
}

// All lists every table, in creation order.
func (t Tables) All() []string {
	return []string{t.SchemaVersion, t.Partitions, t.Body, t.Incoming, t.Outgoing, t.Processor, t.VacuumCounter, t.DeadLetters}
}

// MessageID is a message's client-generated UUIDv7, stored as 16 bytes.
type MessageID [16]byte

// Dialect is every database operation seqbox performs. Methods that take a
// bun.IConn run on the caller's connection or transaction; the others use the
// dialect's own *bun.DB. Not for implementation outside seqbox (see package doc).
type Dialect interface {
	Name() Name
	Features() Feature
	Tables() Tables
	DB() *bun.DB
	// MaxPayloadBytes is the largest payload one row may carry so that a
	// single-row INSERT always fits in one statement on this database.
	MaxPayloadBytes() int
	// MaxStatementBytes bounds the SQL text of one multi-row INSERT.
	MaxStatementBytes() int

	// RunInTx runs fn in one of the outbox's own transactions: READ COMMITTED
	// on MySQL, through the single writer on SQLite.
	RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error
	// IsRetryable reports a transient conflict (also matches ErrRetryable).
	IsRetryable(err error) bool
	// LockWriter takes this process's single-writer lock on databases with
	// one writer (SQLite) and returns its release; elsewhere a no-op. Every
	// write transaction of the process queues on it in turn, which is fair,
	// instead of racing for the file lock in the driver's busy loop.
	LockWriter() (unlock func())

	// SchemaMigrate creates or upgrades the schema under a database lock. Idempotent.
	SchemaMigrate(ctx context.Context) error
	// SchemaStatements is the DDL of every migration, in order (golden files).
	SchemaStatements() []string
	// SchemaDrop drops every seqbox table of this prefix (tests, uninstall).
	SchemaDrop(ctx context.Context) error

	// QueueRegister creates the partition, processor and vacuum rows of a
	// queue if missing, and returns the partition ids by partition number.
	// A queue that exists with another count returns *PartitionCountError.
	QueueRegister(ctx context.Context, params *QueueRegisterParams) ([]int64, error)
	// QueueList returns every registered queue with its partition ids.
	QueueList(ctx context.Context) ([]QueueInfo, error)

	// MessageInsertMany writes body and incoming rows on conn, in order.
	// Rows must already be validated and fit one statement.
	MessageInsertMany(ctx context.Context, conn bun.IConn, params *MessageInsertManyParams) error
	// MessagePendingList returns which of the ids are committed and not yet acked.
	MessagePendingList(ctx context.Context, ids []MessageID) ([]MessageID, error)

	// IncomingPartitionList returns the partitions that have incoming rows (reconciler).
	IncomingPartitionList(ctx context.Context) ([]int64, error)
	// SequenceMove moves up to Limit committed incoming rows of one partition
	// to outgoing, in id order, with gap-free seqs, in one transaction.
	SequenceMove(ctx context.Context, params *SequenceMoveParams) (SequenceMoveResult, error)

	// ProcessorReadyList returns the partitions (of those given) with
	// sequenced, unacked rows, no live lease and no retry pending (poller).
	ProcessorReadyList(ctx context.Context, params *ProcessorReadyListParams) ([]int64, error)
	// ProcessorLease takes the lease of a partition with work, counting an
	// attempt (a crash leaves a trace), and reads its next batch. Leased is
	// false when the partition is leased elsewhere, backing off or empty.
	// The lease commits durably before it returns.
	ProcessorLease(ctx context.Context, params *ProcessorLeaseParams) (ProcessorLeaseResult, error)
	// ProcessorAck records a leased batch's outcome atomically (its own
	// transaction); ErrLeaseLost when the lease moved to another owner.
	ProcessorAck(ctx context.Context, params *ProcessorUpdateParams) error
	// ProcessorAckLease is ProcessorAck of a clean advance (no failure, no
	// dead letter) followed, in the same transaction, by ProcessorLease of
	// next: one commit instead of two while a partition has work. When the
	// partition has no more work the lease is released and Leased is false.
	ProcessorAckLease(ctx context.Context, ack *ProcessorUpdateParams, next *ProcessorLeaseParams) (ProcessorLeaseResult, error)
	// ProcessorLock row-locks a partition's processor row inside tx
	// (transactional mode). ok is false when locked elsewhere or backing off.
	ProcessorLock(ctx context.Context, tx bun.Tx, partitionID int64) (state ProcessorState, ok bool, err error)
	// OutgoingList reads the next batch after the cursor, joined with bodies.
	OutgoingList(ctx context.Context, conn bun.IConn, params *OutgoingListParams) ([]OutgoingMessage, error)
	// ProcessorUpdate records the outcome of a batch on conn: cursor,
	// attempts, retry time, lease release, dead letters and the vacuum
	// counter. With an Owner it returns ErrLeaseLost when the lease moved.
	ProcessorUpdate(ctx context.Context, conn bun.IConn, params *ProcessorUpdateParams) error

	// VacuumCounterList returns partitions whose counter is above zero.
	VacuumCounterList(ctx context.Context) ([]VacuumCounter, error)
	// VacuumDelete deletes outgoing and body rows with FromSeq < seq <= ToSeq
	// of one partition; it returns how many outgoing rows went.
	VacuumDelete(ctx context.Context, params *VacuumDeleteParams) (int, error)
	// VacuumCounterSettle clears a partition's counter if its cursor is at
	// or below deletedUpTo (nothing left to prune), and leaves it otherwise.
	VacuumCounterSettle(ctx context.Context, partitionID, deletedUpTo int64) (cleared bool, err error)
	// VacuumLowestSeq returns the smallest outgoing seq of a partition (0 if none).
	VacuumLowestSeq(ctx context.Context, partitionID int64) (int64, error)

	// PartitionStats reads backlog figures for the given partitions.
	PartitionStats(ctx context.Context) ([]PartitionStats, error)
	// DeadLetterCount counts dead letters by partition and status.
	DeadLetterCount(ctx context.Context) ([]DeadLetterCount, error)
}

// QueueRegisterParams names a queue and its fixed partition count.
type QueueRegisterParams struct {
	Queue      string
	Partitions int
}

// QueueInfo is a registered queue.
type QueueInfo struct {
	Queue        string
	PartitionIDs []int64
}

// PartitionCountError reports a queue registered with another partition count.
type PartitionCountError struct {
	Queue      string
	Registered int
	Requested  int
}

func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("seqbox: queue %q is registered with %d partitions, not %d (the count is fixed at first registration)",
		e.Queue, e.Registered, e.Requested)
}

// MessageRow is one validated message ready to insert.
type MessageRow struct {
	ID          MessageID
	PartitionID int64
	PayloadType string
	Payload     []byte
	Headers     []byte // JSON object text, or nil
}

// MessageInsertManyParams is one chunk of an enqueue.
type MessageInsertManyParams struct {
	Rows []MessageRow
}

// SequenceMoveParams selects the partition and the batch size.
type SequenceMoveParams struct {
	PartitionID int64
	Limit       int
	// Backlog: the previous move of this partition was full, so this one
	// probably is too. A dialect may pick a shape that pays off only for
	// large batches.
	Backlog bool
}

// SequenceMoveResult tells what one sequencer transaction did.
type SequenceMoveResult struct {
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

// OutgoingListParams reads up to Limit rows with seq > AfterSeq.
type OutgoingListParams struct {
	PartitionID int64
	AfterSeq    int64
	Limit       int
}

// OutgoingMessage is one sequenced message with its body.
type OutgoingMessage struct {
	Seq         int64
	ID          MessageID
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
	PayloadType string
	Payload     []byte
	Headers     []byte
	CreatedAt   time.Time
	LastError   string
	Attempts    int
}

// ProcessorUpdateParams is the outcome of one batch. Build it with
// [ProcessorAdvance] or [ProcessorFailure].
type ProcessorUpdateParams struct {
	PartitionID int64
	// Owner guards the update with locked_by = Owner (leased mode); empty in
	// transactional mode, where the caller holds the row lock.
	Owner string
	// ProcessedSeq is the new cursor (unchanged if equal to the old one).
	ProcessedSeq int64
	// Acked is how many messages the cursor moved past (vacuum counter).
	Acked int64
	// Attempts is the head's failure count to store.
	Attempts int
	// LastError is stored when not empty; cleared otherwise.
	LastError string
	// RetryAfter sets next_attempt_at = now + RetryAfter when > 0.
	RetryAfter time.Duration
	// DeadLetters are inserted in the same transaction.
	DeadLetters []DeadLetter
}

// ProcessorAdvance builds the update for acked messages: cursor to seq,
// attempts and error cleared, lease released.
func ProcessorAdvance(partitionID int64, owner string, seq, acked int64, deadLetters []DeadLetter) *ProcessorUpdateParams {
	return &ProcessorUpdateParams{PartitionID: partitionID, Owner: owner, ProcessedSeq: seq, Acked: acked, DeadLetters: deadLetters}
}

// ProcessorFailure builds the update for a failed head: cursor to seq (the
// acked prefix), attempts and error stored, retry after a delay, lease released.
func ProcessorFailure(partitionID int64, owner string, seq, acked int64, attempts int, lastErr string, retryAfter time.Duration, deadLetters []DeadLetter) *ProcessorUpdateParams {
	return &ProcessorUpdateParams{
		PartitionID: partitionID, Owner: owner, ProcessedSeq: seq, Acked: acked,
		Attempts: attempts, LastError: lastErr, RetryAfter: retryAfter, DeadLetters: deadLetters,
	}
}

// VacuumCounter is a partition with processed rows to prune.
type VacuumCounter struct {
	PartitionID  int64
	Counter      int64
	ProcessedSeq int64
}

// VacuumDeleteParams selects one chunk of processed rows.
type VacuumDeleteParams struct {
	PartitionID int64
	FromSeq     int64 // exclusive
	ToSeq       int64 // inclusive
}

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
	LockedUntil    time.Time
	NextAttemptAt  time.Time
}

// DeadLetterCount is the number of dead letters of a partition in a status.
type DeadLetterCount struct {
	PartitionID int64
	Status      string
	Count       int64
}

// String formats the id as a canonical UUID.
func (id MessageID) String() string {
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return string(out)
}

// ErrPartitionCountMismatch matches *PartitionCountError.
var ErrPartitionCountMismatch = errors.New("seqbox: partition count mismatch")

// Is matches ErrPartitionCountMismatch.
func (e *PartitionCountError) Is(target error) bool { return target == ErrPartitionCountMismatch }
