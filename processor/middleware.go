package processor

import (
	"context"

	"github.com/uptrace/bun"
)

// Call is one handler call as a Middleware sees it: the partition's batch
// and, in transactional mode, the transaction that will ack it.
type Call struct {
	Queue     string
	Partition int
	Mode      Mode
	// Batch is what the handler receives; a middleware may read it, and
	// after next returns, Batch.Acked tells how far the handler got.
	Batch *Batch
	// Tx is the ack transaction in ModeTransactional, nil in ModeLeased.
	Tx *bun.Tx
}

// Middleware wraps every handler call of a queue, whatever the handler's
// shape: logging, metrics, tracing, turning panics into errors. It calls
// next to run the rest of the chain and the handler, and returns what the
// call returns (an error to retry, Reject(err) to dead-letter, nil to ack);
// it may also return without calling next. The context it passes to next
// is the one the handler gets.
//
// Order: middleware registered first is outermost. QueueDefaults(Use(a))
// with Queue(…, Use(b)) runs a, then b, then the handler, and unwinds in
// the reverse order. A panic in a middleware is an error of the call, as
// a handler's is.
type Middleware func(ctx context.Context, call *Call, next func(ctx context.Context) error) error

// Use adds middleware to a queue (to every queue through the Builder's
// QueueDefaults); see Middleware for the order.
func Use(mw ...Middleware) QueueOption {
	return func(o *QueueOptions) {
		o.Middleware = append(o.Middleware[:len(o.Middleware):len(o.Middleware)], mw...)
	}
}

// chain runs call through mws around handler, the first middleware outermost.
func chain(mws []Middleware, call *Call, handler func(ctx context.Context) error) func(ctx context.Context) error {
	next := handler
	for i := len(mws) - 1; i >= 0; i-- {
		mw, inner := mws[i], next
		next = func(ctx context.Context) error { return mw(ctx, call, inner) }
	}
	return next
}

// runLeased is one leased handler call through the queue's middleware.
func (t *task) runLeased(ctx context.Context, b *Batch) error {
	call := &Call{Queue: t.queue, Partition: t.partition, Mode: ModeLeased, Batch: b}
	return chain(t.opts.Middleware, call, func(ctx context.Context) error { return t.h.leased(ctx, b) })(ctx)
}

// runTx is one transactional handler call through the queue's middleware.
func (t *task) runTx(ctx context.Context, tx bun.Tx, b *Batch) error {
	call := &Call{Queue: t.queue, Partition: t.partition, Mode: ModeTransactional, Batch: b, Tx: &tx}
	return chain(t.opts.Middleware, call, func(ctx context.Context) error { return t.h.txBatch(ctx, tx, b) })(ctx)
}
