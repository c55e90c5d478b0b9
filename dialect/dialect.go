// Package dialect is the only place in seqbox that knows SQL. It defines one
// interface, [Dialect], with one method per database operation, and three
// implementations: dialect/postgres, dialect/mysql (MySQL 8.0.4+ and
// MariaDB 10.6+) and dialect/sqlite.
//
// Applications do not use this package directly: it is the contract
// between seqbox's engine and its dialects (docs/ARCHITECTURE.md, "The
// public surface"); it may gain methods in any release, code outside
// seqbox must not implement it, and its API carries no compatibility
// promise. seqbox picks the dialect from the *bun.DB it is given.
//
// No dialect imports a database driver: the application opens the *sql.DB
// with the driver of its choice and wraps it in a *bun.DB. The one
// capability that needs a driver's own API, listening for PostgreSQL
// notifications, goes through a postgres.Listener the application passes
// in (adapters for pgx and bun's pgdriver are in the module
// github.com/seqbox/seqbox/pglisten).
package dialect

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
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

// Feature is a bitset of capabilities a dialect has. Code that behaves
// differently on some database branches on a feature, never on Name.
type Feature uint64

// Capabilities.
const (
	// MultiProcess: row locks with SKIP LOCKED exist, so several processes
	// may share the outbox's tables. Without it (SQLite) one process owns
	// them; the crash and fault tests then run one process at a time.
	MultiProcess Feature = 1 << iota
	// SingleWriter: the database serialises writers; the dialect routes the
	// outbox's own writes through one in-process writer (LockWriter), and
	// the processor acks and leases in separate turns of it.
	SingleWriter
)

// Has reports whether every bit of want is set.
func (f Feature) Has(want Feature) bool { return f&want == want }

// MessageID is a message's client-generated UUIDv7 (outbox.MessageID).
type MessageID = outbox.MessageID

// Dialect is every database operation seqbox performs: the union of the
// small interfaces the stages declare where they use them (sequencer.Store,
// engine.PoolStore with the optional engine.AckLeaser and
// engine.GroupLeaser, vacuum.Store), and the operations of the engine's
// enqueue, stats and schema code and of the root's admin actions. A new
// operation goes here, in its consumer's group,
// and in each implementation; docs/ARCHITECTURE.md ("Where changes go")
// walks through it. Every operation takes (ctx, *XxxParams): fields can be
// added without changing a signature. Operations that join the caller's
// transaction take the connection in their params.
//
// Not for implementation outside seqbox (see the package doc).
type Dialect interface {
	Base

	// Schema (the engine, Admin).

	// SchemaMigrate creates or upgrades the schema under a database lock. Idempotent.
	SchemaMigrate(ctx context.Context, params *SchemaMigrateParams) error
	// SchemaStatus reads the schema version without changing anything.
	SchemaStatus(ctx context.Context, params *SchemaStatusParams) (SchemaStatus, error)
	// SchemaDrop drops every seqbox table of this prefix (tests, uninstall).
	SchemaDrop(ctx context.Context, params *SchemaDropParams) error

	// Enqueue and registration (the engine).

	// QueueRegister creates the partition, processor and vacuum rows of
	// every queue given, if missing, in one transaction, and returns each
	// queue's partition ids by partition number, in the order given. A
	// queue that exists with another count returns *PartitionCountError and
	// registers nothing.
	QueueRegister(ctx context.Context, params *QueueRegisterParams) ([][]int64, error)
	// MessageInsertMany writes body and incoming rows on params.Conn, in
	// order, in as many multi-row statements as the chunk bounds and the
	// database's statement size require. Rows must be validated.
	MessageInsertMany(ctx context.Context, params *MessageInsertManyParams) error
	// PurgePartition deletes a partition's unsequenced messages whose
	// headers match and tombstones its sequenced, undelivered ones (the
	// processor passes over them), up to Limit of each, in one transaction
	// holding the partition's sequencer and processor rows.
	PurgePartition(ctx context.Context, params *PurgeParams) (PurgeResult, error)
	// PurgePreview counts what PurgePartition would take from each
	// partition of a queue, by partition id (partitions with nothing to
	// take may be absent).
	PurgePreview(ctx context.Context, params *PurgePreviewParams) (map[int64]PurgeResult, error)
	// DedupClaim claims each key for its message on params.Conn, before the
	// messages are written, and returns per claim the id that holds the
	// key: the claim's own (a new key, or an expired one taken over) or the
	// message that claimed it within its window (a duplicate). A claim
	// racing another transaction's uncommitted claim of the same key waits
	// for it (PostgreSQL, InnoDB).
	DedupClaim(ctx context.Context, params *DedupClaimParams) ([]MessageID, error)
	// MessagePendingList returns which of the ids are committed and not yet acked.
	MessagePendingList(ctx context.Context, params *MessagePendingListParams) ([]MessageID, error)

	// Sequencer (sequencer.Store).

	// IncomingPartitionList returns the partitions that have incoming rows (reconciler).
	IncomingPartitionList(ctx context.Context, params *IncomingPartitionListParams) ([]int64, error)
	// SequenceMove moves up to Limit committed incoming rows of one partition
	// to outgoing, in id order, with gap-free seqs, in one transaction.
	SequenceMove(ctx context.Context, params *SequenceMoveParams) (SequenceMoveResult, error)
	// SequenceMoveMany is SequenceMove for several partitions in one
	// transaction, one result per partition in the order given: with many
	// lightly loaded partitions a commit per partition is what costs.
	SequenceMoveMany(ctx context.Context, params *SequenceMoveManyParams) ([]SequenceMoveResult, error)

	// Processor (engine.PoolStore).

	// ProcessorReadyList returns the partitions (of those given) with
	// sequenced, unacked rows, no live lease and no retry pending (poller).
	ProcessorReadyList(ctx context.Context, params *ProcessorReadyListParams) ([]int64, error)
	// ProcessorLease takes the lease of a partition with work, counting an
	// attempt (a crash leaves a trace), and reads its next batch. Leased is
	// false when the partition is leased elsewhere, backing off or empty.
	// The lease commits before it returns, so a process crash leaves its
	// attempt counted. On PostgreSQL the commit does not wait for the log
	// flush by default (docs/ARCHITECTURE.md, "Asynchronous commits";
	// postgres.WithSynchronousCommit): a server crash
	// can lose a lease taken in its last moments, and so one attempt count.
	// That is safe: the log is replayed in order, so what the holder
	// committed after the lease is lost with it and the batch is delivered
	// again, its Attempts one lower (at-least-once holds; MaxAttempts may
	// allow one delivery more).
	ProcessorLease(ctx context.Context, params *ProcessorLeaseParams) (ProcessorLeaseResult, error)
	// ProcessorAck records a leased batch's outcome atomically, in its own
	// transaction; ErrLeaseLost when the lease moved to another owner. It
	// sets the ID of each of params.DeadLetters it writes.
	ProcessorAck(ctx context.Context, params *ProcessorUpdateParams) error
	// ProcessorLock row-locks a partition's processor row inside
	// params.Conn, a transaction (transactional mode). Locked is false when
	// it is locked elsewhere, backing off or has no work.
	ProcessorLock(ctx context.Context, params *ProcessorLockParams) (ProcessorLockResult, error)
	// OutgoingList reads the next batch after the cursor, joined with bodies.
	OutgoingList(ctx context.Context, params *OutgoingListParams) ([]OutgoingMessage, error)
	// ProcessorUpdate records the outcome of a batch on params.Conn: cursor,
	// attempts, retry time, lease release and dead letters, setting the ID
	// of each of params.DeadLetters. With an Owner it returns ErrLeaseLost
	// when the lease moved.
	ProcessorUpdate(ctx context.Context, params *ProcessorUpdateParams) error

	// Vacuum (vacuum.Store).

	// VacuumCounterList returns the partitions whose cursor is past what
	// has been pruned.
	VacuumCounterList(ctx context.Context, params *VacuumCounterListParams) ([]VacuumCounter, error)
	// VacuumDelete deletes the outgoing and body rows of every range and
	// records each range's ToSeq as pruned, in one transaction (one
	// statement where the database allows): with many lightly loaded
	// partitions, commits and round trips, not rows, are the cost. It
	// returns how many messages went.
	VacuumDelete(ctx context.Context, params *VacuumDeleteParams) (int, error)
	// DedupExpire deletes up to Limit dedup keys whose window has passed
	// and returns how many went.
	DedupExpire(ctx context.Context, params *DedupExpireParams) (int, error)

	// Stats (the engine, Admin).

	// PartitionStats reads every registered partition's backlog figures.
	PartitionStats(ctx context.Context, params *PartitionStatsParams) ([]PartitionStats, error)
	// DeadLetterCount counts dead letters by partition and status.
	DeadLetterCount(ctx context.Context, params *DeadLetterCountParams) ([]DeadLetterCount, error)

	// Dead-letter actions (seqbox.DeadLetters).

	// DeadLetterList lists the letters a filter matches in id order, on
	// params.Conn (the database when nil), locking them there with Lock.
	DeadLetterList(ctx context.Context, params *DeadLetterListParams) ([]DeadLetterRecord, error)
	// DeadLetterTally counts the letters a filter matches, by status, and
	// reads the highest id among them.
	DeadLetterTally(ctx context.Context, params *DeadLetterTallyParams) (DeadLetterTally, error)
	// DeadLetterUpdate moves the letters still in From to To on
	// params.Conn and returns how many moved.
	DeadLetterUpdate(ctx context.Context, params *DeadLetterUpdateParams) (int, error)
	// DeadLetterDelete deletes letters by id on params.Conn.
	DeadLetterDelete(ctx context.Context, params *DeadLetterDeleteParams) (int, error)
	// PartitionList names the partitions of a queue, or of every queue.
	PartitionList(ctx context.Context, params *PartitionListParams) ([]PartitionInfo, error)

	// Parked and retrying partitions (seqbox.Partitions).

	// ProcessorFailingList lists the partitions that are parked or whose
	// head failed and waits for a retry, with their head's failures.
	ProcessorFailingList(ctx context.Context, params *ProcessorFailingListParams) ([]ProcessorAdminState, error)
	// ProcessorAdminRead reads one partition's processor row, and with
	// params.Lock row-locks it inside params.Conn, waiting for another
	// transaction that holds it (an operator's action then sees the row as
	// that transaction left it).
	ProcessorAdminRead(ctx context.Context, params *ProcessorAdminReadParams) (ProcessorAdminReadResult, error)
}

// Base is what every consumer may read: the dialect's properties and its
// transaction discipline. These are not database operations.
type Base interface {
	Name() Name
	Features() Feature
	Tables() Tables
	// Limits bounds what one row and one statement may carry here.
	Limits() Limits
	// Tuning is the measured default concurrency of background work here.
	Tuning() Tuning
	// DB is the database the dialect runs on.
	DB() *bun.DB
	// RunInTx runs fn in one of the outbox's own transactions: READ
	// COMMITTED on MySQL, through the single writer on SQLite.
	RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error
	// TxOptions are the options of the outbox's transactions (READ
	// COMMITTED on MySQL), for those it runs on a database the application
	// hands it: nil when the connections' defaults already are right.
	TxOptions() *sql.TxOptions
	// LockWriter takes this process's single-writer lock on databases with
	// the SingleWriter feature and returns its release; elsewhere a no-op.
	// Every write transaction of the process queues on it in turn, which is
	// fair, instead of racing for the file lock in the driver's busy loop.
	LockWriter() (unlock func())
	// IsRetryable reports a transient conflict (also matches ErrRetryable):
	// the same operation may be retried at once.
	IsRetryable(err error) bool
	// IsTransient reports an error that a later attempt may not meet: a
	// conflict, or a connection that dropped or was killed.
	IsTransient(err error) bool
	// SchemaStatements is the DDL of every migration, in order (golden files).
	SchemaStatements() []string
	// Prepare prepares the statements the dialect runs prepared (the hot
	// path's) on the database now. Call it while holding no connection:
	// a prepared statement run in a transaction before the database has it
	// is prepared on the transaction's connection for that run only.
	Prepare(ctx context.Context) error
	// Release closes the statements the dialect prepared on the database,
	// on every connection that holds one; a pooled connection would keep
	// them, on the server too, for as long as it lives. The dialect stays
	// usable: a later operation prepares what it needs again. Call it when
	// no operation is running (the outbox does once its tasks have ended).
	Release() error
}

// Limits bounds rows and statements on one database.
type Limits struct {
	// MaxPayloadBytes is the largest payload one row may carry so that a
	// single-row INSERT always fits in one statement.
	MaxPayloadBytes int
	// MaxStatementBytes bounds the SQL text of one multi-row INSERT.
	MaxStatementBytes int
}

// Tuning holds per-database defaults, measured on 2 cores (BENCHMARKS.md).
type Tuning struct {
	// SequencerWorkers: 2 on the servers, 1 with a single writer, where
	// more workers only queue. With many partitions some are always dirty,
	// so every worker is always moving and the sequencer's share of a
	// saturated server grows with their number, not with its work: 4 on
	// PostgreSQL at 1,024 partitions delivered 24.5-25.2k msgs/s against
	// 30.9-32.1k with 2, whose moves carry twice the rows per partition;
	// at 16 partitions and at 1k msgs/s the two were the same (a move
	// takes every waiting partition, up to MovePartitions). One falls
	// behind: a partition with a backlog is moved alone. BENCHMARKS.md,
	// "PostgreSQL runs two sequencer workers, not four".
	SequencerWorkers int
	// VacuumWorkers is how many partitions a sweep prunes at once: one
	// sweeping connection gets too small a share of a busy server to keep
	// up; one writer gains nothing from more.
	VacuumWorkers int
}
