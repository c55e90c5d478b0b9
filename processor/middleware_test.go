package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
)

// recordingMiddleware appends name+">" before next and "<"+name after it.
func recordingMiddleware(name string, log *[]string, calls *[]*Call) Middleware {
	return func(ctx context.Context, c *Call, next func(context.Context) error) error {
		*log = append(*log, name+">")
		*calls = append(*calls, c)
		err := next(ctx)
		*log = append(*log, "<"+name)
		return err
	}
}

// TestMiddlewareOrder: the first middleware registered is outermost (the
// queue defaults' before the queue's own), every shape goes through the
// chain, and the Call names the queue, partition, mode, batch and tx.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var log []string
	var calls []*Call
	opts := NewQueueOptions(Use(recordingMiddleware("defaults", &log, &calls)), Use(recordingMiddleware("queue", &log, &calls)))
	leased := &task{queue: "q", partition: 3, opts: opts, h: Leased(func(context.Context, Delivery) error {
		log = append(log, "handler")
		return nil
	})}
	b := &Batch{Messages: make([]Delivery, 2)}
	require.NoError(t, leased.runLeased(context.Background(), b))
	require.Equal(t, []string{"defaults>", "queue>", "handler", "handler", "<queue", "<defaults"}, log)
	require.Len(t, calls, 2)
	require.Same(t, calls[0], calls[1], "one Call per handler call")
	require.Equal(t, "q", calls[0].Queue)
	require.Equal(t, 3, calls[0].Partition)
	require.Equal(t, ModeLeased, calls[0].Mode)
	require.Same(t, b, calls[0].Batch)
	require.Nil(t, calls[0].Tx)
	require.Equal(t, 2, calls[0].Batch.Acked(), "after next, the batch tells how far the handler got")

	log, calls = nil, nil
	tx := &task{queue: "q", partition: 1, opts: opts, h: Transactional(func(context.Context, bun.Tx, Delivery) error {
		log = append(log, "handler")
		return nil
	})}
	require.NoError(t, tx.runTx(context.Background(), bun.Tx{}, &Batch{Messages: make([]Delivery, 1)}))
	require.Equal(t, []string{"defaults>", "queue>", "handler", "<queue", "<defaults"}, log)
	require.Equal(t, ModeTransactional, calls[0].Mode)
	require.NotNil(t, calls[0].Tx)
}

// TestMiddlewareShortCircuitAndErrors: a middleware may answer without
// calling the handler, and sees the handler's error on the way out.
func TestMiddlewareShortCircuitAndErrors(t *testing.T) {
	t.Parallel()
	errBusy := errors.New("busy")
	var seen error
	called := false
	h := Leased(func(context.Context, Delivery) error { called = true; return errBoom })
	observe := func(ctx context.Context, c *Call, next func(context.Context) error) error {
		seen = next(ctx)
		return seen
	}
	task := &task{queue: "q", opts: NewQueueOptions(Use(observe)), h: h}
	require.ErrorIs(t, task.runLeased(context.Background(), &Batch{Messages: make([]Delivery, 1)}), errBoom)
	require.ErrorIs(t, seen, errBoom)
	require.True(t, called)

	called = false
	refuse := func(context.Context, *Call, func(context.Context) error) error { return errBusy }
	task.opts = NewQueueOptions(Use(refuse, observe))
	require.ErrorIs(t, task.runLeased(context.Background(), &Batch{Messages: make([]Delivery, 1)}), errBusy)
	require.False(t, called, "the handler is not called")

	require.ErrorIs(t, NewQueueOptions(Use(nil)).Validate(), ErrInvalidOptions)
}
