package processor

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
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
	return &useOption{mw: append([]Middleware(nil), mw...)}
}

type useOption struct{ mw []Middleware }

func (o *useOption) queueOption() {}

// ApplyTo records the option (its middleware is bound by Handler.Bind).
func (o *useOption) ApplyTo(opts *handling.Options) {
	set(opts, "Use")
	for i, mw := range o.mw {
		if mw == nil {
			opts.Problems = append(opts.Problems, handling.Problem{Option: "Use", Reason: fmt.Sprintf("middleware [%d] is nil", i)})
		}
	}
}

// Bind wraps the handler in the middleware of opts, in order.
func (h *handler) Bind(opts []handling.Option) handling.Runner {
	r := &runner{h: h}
	for _, o := range opts {
		if u, ok := o.(*useOption); ok {
			r.mws = append(r.mws, u.mw...)
		}
	}
	return r
}

// runner is a handler bound to its queue's middleware.
type runner struct {
	h   *handler
	mws []Middleware
}

// Run makes the batch, runs the chain and reports the outcome; a panic is
// the call's error, and what was acked before it stays acked.
func (r *runner) Run(ctx context.Context, c *handling.Call) handling.Result {
	b := &Batch{Messages: make([]Delivery, len(c.Messages))}
	for i, m := range c.Messages {
		b.Messages[i] = Delivery{ID: m.ID, Queue: c.Queue, Partition: c.Partition, Key: m.Key, Seq: m.Seq,
			PayloadType: m.PayloadType, Payload: m.Payload, Headers: m.Headers, EnqueuedAt: m.EnqueuedAt, Attempts: c.Attempts}
	}
	call := &Call{Queue: c.Queue, Partition: c.Partition, Mode: r.h.mode, Batch: b, Tx: c.Tx}
	handler := func(ctx context.Context) error { return r.h.leased(ctx, b) }
	if r.h.mode == ModeTransactional {
		handler = func(ctx context.Context) error { return r.h.txBatch(ctx, *c.Tx, b) }
	}
	err := lifecycle.Safely(func() error { return chain(r.mws, call, handler)(ctx) })
	return handling.Result{Acked: b.acked, Rejected: b.rejected, Err: err}
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
