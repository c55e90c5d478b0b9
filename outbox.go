package seqbox

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
)

// Outbox is a running outbox: enqueue through it inside your transactions,
// read its state, and stop it when the process ends. Build it with
// New(db)…Start(ctx). Its methods are safe for concurrent use.
type Outbox struct {
	e *engine.Outbox
}

// Enqueue writes one message to queue on conn, usually the caller's
// transaction (bun.Tx or *sql.Tx): the message exists iff it commits. It
// returns the message's id or, when m is a duplicate (Message.DedupKey),
// the id of the message that holds its key. Given a *bun.DB or *sql.DB it
// runs a transaction of its own; a bun.Conn or *sql.Conn is used as a
// transaction the caller owns. Invalid input is a typed error and writes
// nothing (see EnqueueBatch).
func (o *Outbox) Enqueue(ctx context.Context, conn bun.IConn, queue string, m outbox.Message) (outbox.MessageID, error) {
	return o.e.Enqueue(ctx, conn, queue, m)
}

// EnqueueBatch validates every message, then writes them on conn in order,
// in multi-row statements, and returns their ids in order. Nothing is
// written if any message is invalid (a *MessageError names it). A message
// whose DedupKey is taken is not written and gets the holder's id;
// EnqueueBatchResult says which.
func (o *Outbox) EnqueueBatch(ctx context.Context, conn bun.IConn, queue string, msgs []outbox.Message) ([]outbox.MessageID, error) {
	return o.e.EnqueueBatch(ctx, conn, queue, msgs)
}

// EnqueueBatchResult is EnqueueBatch, also saying per message whether it
// was a duplicate (outbox.Enqueued).
func (o *Outbox) EnqueueBatchResult(ctx context.Context, conn bun.IConn, queue string, msgs []outbox.Message) ([]outbox.Enqueued, error) {
	return o.e.EnqueueBatchResult(ctx, conn, queue, msgs)
}

// Transaction runs fn in a transaction on the outbox's database and, once
// it has committed, wakes the sequencer for every partition fn enqueued to
// (through the tx it receives). An enqueue in a transaction you run
// yourself is found within milliseconds anyway; Transaction saves those.
// On SQLite the transaction queues on the process's single writer: do not
// start another write transaction from inside fn.
func (o *Outbox) Transaction(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return o.e.Transaction(ctx, fn)
}

// Flush wakes the sequencer now for partitions enqueued through
// transactions you committed yourself (Transaction does this for you).
func (o *Outbox) Flush() { o.e.Flush() }

// WaitProcessed returns once every given message has been acked (or
// dead-lettered), or with a *PendingError listing those still pending when
// ctx ends first. Ids that were never committed count as done. It polls,
// backing off to 250 ms; on PostgreSQL each poll reads the backlogs of the
// partitions the ids are in (docs/ARCHITECTURE.md, "Which messages are
// pending"): it is meant for tests and read-your-writes waits, not for
// watching a large backlog drain (Stats says that).
func (o *Outbox) WaitProcessed(ctx context.Context, ids ...outbox.MessageID) error {
	return o.e.WaitProcessed(ctx, ids...)
}

// Stats reads every partition's backlog, failing heads and dead letters
// from the database, with this process's counters.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) { return o.e.Stats(ctx) }

// Counters returns this process's counters (no database access).
func (o *Outbox) Counters() outbox.Counters { return o.e.Counters() }

// Admin returns the operator's actions on this outbox's tables: dead
// letters, parked and retrying partitions, purge. What it replays or
// resumes is picked up by this process at once.
func (o *Outbox) Admin() *Admin {
	return &Admin{d: o.e.Dialect(), dirty: o.e.MarkDirty, resumed: o.e.Notify}
}

// Stop stops taking new work and waits for in-flight batches to finish.
// If ctx ends first, it cancels them and returns ctx's error at once, as
// http.Server.Shutdown does: their transactions roll back and their
// leases expire, so another process (or the next start) redelivers them
// and nothing is lost. A handler that ignores its context may still be
// running when Stop returns; Stopped is closed once every task has ended.
// Safe to call more than once; Enqueue then returns ErrStopped.
func (o *Outbox) Stop(ctx context.Context) error { return o.e.Stop(ctx) }

// Stopped is closed once every background task has ended: after Stop
// returned, or later when Stop's context ended before a handler did.
func (o *Outbox) Stopped() <-chan struct{} { return o.e.Stopped() }
