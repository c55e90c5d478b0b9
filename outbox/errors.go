package outbox

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, matched with errors.Is. The typed errors below carry the
// offending values for errors.As.
var (
	ErrInvalidQueueName    = errors.New("seqbox: invalid queue name")
	ErrInvalidPayloadType  = errors.New("seqbox: invalid payload type")
	ErrPayloadTooLarge     = errors.New("seqbox: payload too large")
	ErrPartitionOutOfRange = errors.New("seqbox: partition out of range")
	ErrQueueNotRegistered  = errors.New("seqbox: queue not registered")
	ErrEmptyBatch          = errors.New("seqbox: empty batch")
	ErrKeyAndPartition     = errors.New("seqbox: message sets both Key and Partition")
	ErrInvalidHeaders      = errors.New("seqbox: invalid headers")
	ErrInvalidDedupKey     = errors.New("seqbox: invalid dedup key")
	// ErrUnencodable: NewMessage could not encode the value (or had no codec).
	ErrUnencodable = errors.New("seqbox: value does not encode")
	ErrNilConn     = errors.New("seqbox: nil connection")
	// ErrInvalidConfig matches every *ConfigError.
	ErrInvalidConfig = errors.New("seqbox: invalid configuration")
	// ErrStopped: the outbox was stopped; it enqueues no more.
	ErrStopped = errors.New("seqbox: outbox stopped")
	// ErrWriterHeld: on SQLite (one writer), a write transaction —
	// Transaction, Enqueue on a *bun.DB or *sql.DB, an admin action — was
	// started with the context of a transaction of the outbox's that holds
	// the process's writer (a transactional handler's, Transaction's fn),
	// so it would wait for itself for ever. Write through the tx given. Not
	// caught: such a write made with a context that does not come from the
	// outer one (context.Background(), say), which still deadlocks.
	ErrWriterHeld = errors.New("seqbox: this call chain already holds the database's single writer: write through the tx you were given")
)

// ErrSchemaMissing: Start found the prefix's tables absent (or older than
// this release) and was not asked to migrate. The error Start returns
// names the fixes: seqbox migrate, Migrate(true) or seqbox.Migrations.
var ErrSchemaMissing = errors.New("seqbox: schema missing")

// MessageError is a rejected message of an enqueue: which one, why (Err is
// one of the sentinels), and the values involved. Nothing was written.
type MessageError struct {
	Index       int // position in the batch
	Queue       string
	Partition   int
	PayloadType string
	Size, Max   int    // payload sizes, for ErrPayloadTooLarge
	DedupKey    string // for ErrInvalidDedupKey
	Err         error
}

func (e *MessageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: message %d of queue %q", e.Err, e.Index, e.Queue)
	switch {
	case errors.Is(e.Err, ErrPayloadTooLarge):
		fmt.Fprintf(&b, ": %d bytes, limit %d", e.Size, e.Max)
	case errors.Is(e.Err, ErrPartitionOutOfRange):
		fmt.Fprintf(&b, ": partition %d, queue has %d", e.Partition, e.Max)
	case errors.Is(e.Err, ErrInvalidPayloadType):
		fmt.Fprintf(&b, ": %q (1..255 printable ASCII characters)", e.PayloadType)
	case errors.Is(e.Err, ErrInvalidDedupKey):
		fmt.Fprintf(&b, ": %d bytes (at most %d bytes of valid UTF-8)", len(e.DedupKey), MaxDedupKeyLen)
	}
	return b.String()
}

func (e *MessageError) Unwrap() error { return e.Err }

// QueueNameError carries an invalid queue name; it matches ErrInvalidQueueName.
type QueueNameError struct{ Name string }

func (e *QueueNameError) Error() string {
	return fmt.Sprintf("seqbox: invalid queue name %q: use 1..64 of [A-Za-z0-9._-], starting and ending with a letter or digit", e.Name)
}
func (e *QueueNameError) Is(target error) bool { return target == ErrInvalidQueueName }

// QueueError names an unregistered queue; it matches ErrQueueNotRegistered.
type QueueError struct{ Queue string }

func (e *QueueError) Error() string {
	return fmt.Sprintf("seqbox: queue %q is not registered: add it with Builder.Queue", e.Queue)
}
func (e *QueueError) Is(target error) bool { return target == ErrQueueNotRegistered }

// ConfigError names a setting that cannot work and says why; it matches
// ErrInvalidConfig and, when set, Also (e.g. processor.ErrInvalidOptions).
// Start reports every one it finds at once, joined (errors.Join).
type ConfigError struct {
	// Field names the setting as the Builder takes it, e.g.
	// "SequencerWorkers" or "Queue(orders).BatchSize".
	Field  string
	Reason string
	Also   error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("seqbox: invalid configuration: %s: %s", e.Field, e.Reason)
}

// Is matches ErrInvalidConfig and Also.
func (e *ConfigError) Is(target error) bool {
	return target == ErrInvalidConfig || (e.Also != nil && target == e.Also)
}

// HeaderError names a header that cannot be stored as given; it matches
// ErrInvalidHeaders. Key is quoted in the message, since it may hold any byte.
type HeaderError struct {
	Key    string
	Reason string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("seqbox: invalid headers: header %+q: %s (keys and values must be valid UTF-8)", e.Key, e.Reason)
}
func (e *HeaderError) Is(target error) bool { return target == ErrInvalidHeaders }

// PendingError lists messages not yet processed when WaitProcessed gave up.
type PendingError struct {
	IDs []MessageID
	Err error // the context's error
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("seqbox: %d message(s) still pending: %v", len(e.IDs), e.Err)
}
func (e *PendingError) Unwrap() error { return e.Err }
