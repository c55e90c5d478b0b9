package seqbox

import (
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/mysql"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Every error seqbox returns, reachable from here; match them with
// errors.Is, and the typed ones with errors.As. Each message carries the
// "seqbox: " prefix once.
var (
	// Enqueue: the whole call wrote nothing.
	ErrInvalidQueueName    = outbox.ErrInvalidQueueName
	ErrInvalidPayloadType  = outbox.ErrInvalidPayloadType
	ErrPayloadTooLarge     = outbox.ErrPayloadTooLarge
	ErrPartitionOutOfRange = outbox.ErrPartitionOutOfRange
	ErrQueueNotRegistered  = outbox.ErrQueueNotRegistered
	ErrEmptyBatch          = outbox.ErrEmptyBatch
	ErrKeyAndPartition     = outbox.ErrKeyAndPartition
	ErrInvalidHeaders      = outbox.ErrInvalidHeaders
	ErrInvalidDedupKey     = outbox.ErrInvalidDedupKey
	ErrUnencodable         = outbox.ErrUnencodable
	ErrNilConn             = outbox.ErrNilConn
	ErrWriterHeld          = outbox.ErrWriterHeld
	// ErrStopped: the outbox was stopped and enqueues no more.
	ErrStopped = outbox.ErrStopped
	// ErrInvalidMessageID: ParseMessageID was given something else.
	ErrInvalidMessageID = outbox.ErrInvalidMessageID

	// Start.
	ErrSchemaMissing          = outbox.ErrSchemaMissing
	ErrInvalidConfig          = outbox.ErrInvalidConfig
	ErrPartitionCountMismatch = outbox.ErrPartitionCountMismatch
	ErrInvalidOptions         = processor.ErrInvalidOptions
	ErrInvalidHandler         = processor.ErrInvalidHandler
	ErrInvalidPrefix          = dialect.ErrInvalidPrefix
	// ErrServerTooOld: the MySQL/MariaDB server lacks SKIP LOCKED or
	// JSON_TABLE (MySQL 8.0.4+ and MariaDB 10.6+ have them).
	ErrServerTooOld = mysql.ErrServerTooOld
	// ErrUnsupportedServer: the server speaks MySQL's protocol but lacks
	// what seqbox relies on (TiDB: docs/DISTRIBUTED.md).
	ErrUnsupportedServer = mysql.ErrUnsupportedServer
	// ErrNoListener: a PostgreSQL listener cannot listen (the *bun.DB was
	// not opened with the adapter's driver); Start logs it and polls.
	ErrNoListener = dialect.ErrNoListener
	// ErrRetryable marks a transient database conflict (deadlock,
	// serialization failure, SQLITE_BUSY) in an error from the database:
	// the same call may be retried.
	ErrRetryable = dialect.ErrRetryable

	// Handlers.
	ErrRejected    = processor.ErrRejected
	ErrUndecodable = processor.ErrUndecodable

	// Operations.
	ErrInvalidPurgeFilter = outbox.ErrInvalidPurgeFilter
	ErrNotFound           = deadletter.ErrNotFound
	ErrNoMatch            = deadletter.ErrNoMatch
	ErrWrongStatus        = deadletter.ErrWrongStatus
	ErrInvalidSelection   = deadletter.ErrInvalidSelection
	ErrCountChanged       = deadletter.ErrCountChanged
)

// Typed errors, for errors.As.
type (
	ConfigError         = outbox.ConfigError
	MessageError        = outbox.MessageError
	QueueError          = outbox.QueueError
	QueueNameError      = outbox.QueueNameError
	HeaderError         = outbox.HeaderError
	PendingError        = outbox.PendingError
	PartitionCountError = outbox.PartitionCountError
	RejectError         = processor.RejectError
	DecodeError         = processor.DecodeError
	StatusError         = deadletter.StatusError
	CountError          = deadletter.CountError
)

// MessageID is a message's id (outbox.MessageID).
type MessageID = outbox.MessageID

// ParseMessageID reads a message id's canonical UUID text, as
// MessageID.String writes it (e.g. from a log line or seqbox dlq list).
func ParseMessageID(s string) (MessageID, error) { return outbox.ParseMessageID(s) }
