// Package deadletter holds the dead-letter record: a self-contained copy of
// a message that will not be retried, written in the same transaction that
// moves the partition's cursor past it.
package deadletter

import (
	"github.com/seqbox/seqbox/dialect"
)

// Status is a dead letter's state, as stored in its status column.
type Status string

// StatusPending is every dead letter's state when written: the operator
// actions that move it on are not built yet (docs/ARCHITECTURE.md, "Dead
// letters").
const StatusPending Status = dialect.DeadLetterPending

// MaxErrorLen bounds the stored error text.
const MaxErrorLen = dialect.MaxErrorTextLen

// New copies an outgoing message into a dead-letter record. The cause's
// text is made storable on every database (dialect.ErrorText): it is data
// from anywhere and must never stop the record from being written.
func New(partitionID int64, m dialect.OutgoingMessage, cause error, attempts int) dialect.DeadLetter {
	msg := "rejected"
	if cause != nil {
		msg = dialect.ErrorString(cause)
	}
	return dialect.DeadLetter{
		PartitionID: partitionID,
		Seq:         m.Seq,
		MessageID:   m.ID,
		Key:         m.Key,
		PayloadType: m.PayloadType,
		Payload:     m.Payload,
		Headers:     m.Headers,
		CreatedAt:   m.CreatedAt,
		LastError:   dialect.ErrorText(msg),
		Attempts:    attempts,
	}
}
