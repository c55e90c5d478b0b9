// Package deadletter holds the dead-letter record: a self-contained copy of
// a message that will not be retried, written in the same transaction that
// moves the partition's cursor past it. The operator API (list, replay,
// resolve, discard, cleanup, requeue) builds on these rows.
package deadletter

import (
	"github.com/seqbox/seqbox/dialect"
)

// Status is a dead letter's state.
type Status string

// States: pending → reprocessing (replay, with a deadline) → resolved, or
// back to pending; pending → discarded.
const (
	StatusPending      Status = "pending"
	StatusReprocessing Status = "reprocessing"
	StatusResolved     Status = "resolved"
	StatusDiscarded    Status = "discarded"
)

// MaxErrorLen bounds the stored error text.
const MaxErrorLen = 4096

// New copies an outgoing message into a dead-letter record.
func New(partitionID int64, m dialect.OutgoingMessage, cause error, attempts int) dialect.DeadLetter {
	msg := "rejected"
	if cause != nil {
		msg = cause.Error()
	}
	return dialect.DeadLetter{
		PartitionID: partitionID,
		Seq:         m.Seq,
		MessageID:   m.ID,
		PayloadType: m.PayloadType,
		Payload:     m.Payload,
		Headers:     m.Headers,
		CreatedAt:   m.CreatedAt,
		LastError:   TruncateError(msg),
		Attempts:    attempts,
	}
}

// TruncateError cuts an error text to MaxErrorLen bytes on a rune boundary.
func TruncateError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	cut := MaxErrorLen
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
