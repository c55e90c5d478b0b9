package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// testNestedWrites: a write started from inside one of the outbox's
// transactions, with its context — ob.Transaction, Enqueue on the database,
// an admin action, from a transactional handler or from inside
// ob.Transaction — is a transaction of its own. Where the process has one
// writer (SQLite) the outer transaction holds it, so the nested write
// returns ErrWriterHeld at once instead of waiting for itself for ever;
// elsewhere it simply runs. Writing through the tx given works everywhere.
func testNestedWrites(e *Env) {
	type outcome struct {
		what string
		err  error
	}
	results := make(chan outcome, 64) // room for a handler called again
	var obp atomic.Pointer[Outbox]
	side := outbox.Message{PayloadType: "side"}
	nested := func(ctx context.Context, where string) {
		ob := obp.Load()
		results <- outcome{where + ": Transaction", ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
			_, err := ob.Enqueue(ctx, tx, "side", side)
			return err
		})}
		_, err := ob.Enqueue(ctx, e.DB, "side", side)
		results <- outcome{where + ": Enqueue on the *bun.DB", err}
		_, err = ob.DeadLetters().Discard(ctx, deadletter.IDs(-1), "none")
		if errors.Is(err, deadletter.ErrNotFound) {
			err = nil // it ran: there is no such letter
		}
		results <- outcome{where + ": DeadLetters().Discard", err}
	}
	ob := e.Start(e.Builder().Queue("side", 1, nil).Queue("nest", 1, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		_, err := obp.Load().Enqueue(ctx, tx, "side", side)
		results <- outcome{"handler: Enqueue on its tx", err}
		nested(ctx, "handler")
		return nil
	})))
	obp.Store(ob)
	id, err := ob.Enqueue(e.Ctx, e.DB, "nest", outbox.Message{PayloadType: "nest"})
	require.NoError(e.T, err)
	go func() {
		results <- outcome{"Transaction", ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
			nested(ctx, "in Transaction")
			return nil
		})}
	}()

	// A failure bound: the writes deadlocked before ErrWriterHeld.
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	single := e.D.Features().Has(dialect.SingleWriter)
	for range 8 {
		var r outcome
		select {
		case r = <-results:
		case <-ctx.Done():
			e.T.Fatalf("a nested write did not return: %v", ctx.Err())
		}
		switch {
		case r.what == "handler: Enqueue on its tx", r.what == "Transaction":
			require.NoError(e.T, r.err, r.what)
		case single:
			require.ErrorIs(e.T, r.err, outbox.ErrWriterHeld, r.what)
		default:
			require.NoError(e.T, r.err, r.what)
		}
	}
	require.NoError(e.T, ob.WaitProcessed(ctx, id), "the handler's own write and ack commit")
}
