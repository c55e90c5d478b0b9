package processor

import (
	"context"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/outbox"
)

// MessageID is a message's id (outbox.MessageID).
type MessageID = outbox.MessageID

// Delivery is one message handed to a handler.
type Delivery struct {
	ID        MessageID
	Queue     string
	Partition int // 0-based
	// Key is the Key the message was enqueued with ("" when it had
	// none): a relay's partition or routing key.
	Key         string
	Seq         int64
	PayloadType string
	Payload     []byte
	Headers     map[string]string
	EnqueuedAt  time.Time
	// Attempts counts earlier deliveries of this partition's head that failed
	// or were abandoned (a crash, an expired lease). Above zero, this message
	// may have been seen before; zero does not promise it was not: a
	// PostgreSQL server crash can lose the count of a lease taken in its
	// last moments (docs/ARCHITECTURE.md, "Asynchronous commits").
	Attempts int
}

// Mode is how a queue's handler runs.
type Mode int

// Modes.
const (
	// ModeLeased runs the handler outside any transaction under a lease:
	// at-least-once delivery, for handlers that do outside I/O.
	ModeLeased Mode = iota + 1
	// ModeTransactional runs the handler inside the transaction that acks:
	// exactly-once effects for writes to the same database.
	ModeTransactional
)

func (m Mode) String() string {
	switch m {
	case ModeLeased:
		return "leased"
	case ModeTransactional:
		return "transactional"
	default:
		return "invalid"
	}
}

// Handler is a queue's handler in one of four shapes: build it with
// Leased, LeasedBatch, Transactional or TransactionalBatch (or their typed
// forms, JSON and Decoded). Only this package implements it.
type Handler interface {
	// Mode reports how the handler runs.
	Mode() Mode
	sealed()
}

// ErrInvalidHandler matches a Handler that cannot run: built from a nil
// function (Start reports it, naming the queue).
var ErrInvalidHandler = handling.ErrInvalidHandler

// handler is every Handler: one of the two functions is set, by mode.
type handler struct {
	mode    Mode
	leased  func(ctx context.Context, b *Batch) error
	txBatch func(ctx context.Context, tx bun.Tx, b *Batch) error
}

func (h *handler) sealed()             {}
func (h *handler) Mode() Mode          { return h.mode }
func (h *handler) Transactional() bool { return h.mode == ModeTransactional }

// Validate reports a handler built from a nil function.
func (h *handler) Validate() error {
	if h.leased == nil && h.txBatch == nil {
		return handling.Invalid("built from a nil function")
	}
	return nil
}

// Leased handles one message at a time outside any transaction. Return nil
// to ack, an error to retry later, Reject(err) to dead-letter the message.
func Leased(fn func(ctx context.Context, d Delivery) error) Handler {
	if fn == nil {
		return &handler{mode: ModeLeased}
	}
	return &handler{mode: ModeLeased, leased: func(ctx context.Context, b *Batch) error {
		return b.each(ctx, fn)
	}}
}

// LeasedBatch handles a whole batch; see Batch for partial acks.
func LeasedBatch(fn func(ctx context.Context, b *Batch) error) Handler {
	return &handler{mode: ModeLeased, leased: fn}
}

// Transactional handles one message at a time inside the ack transaction.
// An error rolls back the whole batch, the handler's writes included.
// Write through tx: on SQLite, which has one writer, a write transaction
// started with ctx (Outbox.Transaction, Enqueue on the database) returns
// outbox.ErrWriterHeld instead of waiting for the writer tx holds.
func Transactional(fn func(ctx context.Context, tx bun.Tx, d Delivery) error) Handler {
	if fn == nil {
		return &handler{mode: ModeTransactional}
	}
	return &handler{mode: ModeTransactional, txBatch: func(ctx context.Context, tx bun.Tx, b *Batch) error {
		return b.each(ctx, func(ctx context.Context, d Delivery) error { return fn(ctx, tx, d) })
	}}
}

// TransactionalBatch handles a whole batch inside the ack transaction.
func TransactionalBatch(fn func(ctx context.Context, tx bun.Tx, b *Batch) error) Handler {
	return &handler{mode: ModeTransactional, txBatch: fn}
}

// Batch is the messages of one partition handed to a batch handler, in seq
// order. A handler that returns nil acks them all. One that returns an
// error keeps what it acked with Ack or Reject (leased mode) and the first
// unacked message is retried. Returning Reject(err) dead-letters the first
// unacked message and retries the rest.
type Batch struct {
	Messages []Delivery
	acked    int
	rejected map[int]error
}

// Ack marks the first n messages as done.
func (b *Batch) Ack(n int) {
	b.acked = max(b.acked, min(n, len(b.Messages)))
}

// Reject sends the first unacked message to dead letters and counts it as done.
func (b *Batch) Reject(err error) {
	if b.acked >= len(b.Messages) {
		return
	}
	if b.rejected == nil {
		b.rejected = make(map[int]error)
	}
	b.rejected[b.acked] = err
	b.acked++
}

// Acked is how many leading messages are done.
func (b *Batch) Acked() int { return b.acked }

// each runs a per-message handler over the batch, stopping at the first
// failure so that order holds.
func (b *Batch) each(ctx context.Context, fn func(ctx context.Context, d Delivery) error) error {
	for i := b.acked; i < len(b.Messages); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := fn(ctx, b.Messages[i])
		if err != nil {
			return err
		}
		b.Ack(i + 1)
	}
	return nil
}

// ErrRejected matches every error made by Reject.
var ErrRejected = handling.ErrRejected

// RejectError marks a message that must not be retried.
type RejectError struct{ Err error }

// Reject wraps err: the message goes to dead letters and the partition moves on.
func Reject(err error) error { return &RejectError{Err: err} }

func (e *RejectError) Error() string {
	if e.Err == nil {
		return "seqbox: message rejected"
	}
	return "seqbox: message rejected: " + strings.TrimPrefix(e.Err.Error(), "seqbox: ")
}
func (e *RejectError) Unwrap() error        { return e.Err }
func (e *RejectError) Is(target error) bool { return target == ErrRejected }
