package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/seqbox/seqbox/internal/handling"
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

// run is one handler call as the engine makes it, through opts' middleware.
func run(h Handler, partition, n int, tx *bun.Tx, opts ...QueueOption) handling.Result {
	own := make([]handling.Option, len(opts))
	for i, o := range opts {
		own[i] = o.(handling.Option)
	}
	return h.(handling.Handler).Bind(own).Run(context.Background(), &handling.Call{Queue: "q", Partition: partition, Tx: tx, Messages: make([]handling.Message, n)})
}

var errBoom = errors.New("boom")

// TestMiddlewareOrder: the first middleware registered is outermost (the
// queue defaults' before the queue's own), every shape goes through the
// chain, and the Call names the queue, partition, mode, batch and tx.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var log []string
	var calls []*Call
	opts := []QueueOption{Use(recordingMiddleware("defaults", &log, &calls)), Use(recordingMiddleware("queue", &log, &calls))}
	leased := Leased(func(context.Context, Delivery) error {
		log = append(log, "handler")
		return nil
	})
	require.NoError(t, run(leased, 3, 2, nil, opts...).Err)
	require.Equal(t, []string{"defaults>", "queue>", "handler", "handler", "<queue", "<defaults"}, log)
	require.Len(t, calls, 2)
	require.Same(t, calls[0], calls[1], "one Call per handler call")
	require.Equal(t, "q", calls[0].Queue)
	require.Equal(t, 3, calls[0].Partition)
	require.Equal(t, ModeLeased, calls[0].Mode)
	require.Len(t, calls[0].Batch.Messages, 2)
	require.Nil(t, calls[0].Tx)
	require.Equal(t, 2, calls[0].Batch.Acked(), "after next, the batch tells how far the handler got")

	log, calls = nil, nil
	tx := Transactional(func(context.Context, bun.Tx, Delivery) error {
		log = append(log, "handler")
		return nil
	})
	require.NoError(t, run(tx, 1, 1, &bun.Tx{}, opts...).Err)
	require.Equal(t, []string{"defaults>", "queue>", "handler", "<queue", "<defaults"}, log)
	require.Equal(t, ModeTransactional, calls[0].Mode)
	require.NotNil(t, calls[0].Tx)
}

// TestMiddlewareShortCircuitAndErrors: a middleware may answer without
// calling the handler, and sees the handler's error on the way out; a
// panic in a middleware is the call's error.
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
	require.ErrorIs(t, run(h, 0, 1, nil, Use(observe)).Err, errBoom)
	require.ErrorIs(t, seen, errBoom)
	require.True(t, called)

	called = false
	refuse := func(context.Context, *Call, func(context.Context) error) error { return errBusy }
	require.ErrorIs(t, run(h, 0, 1, nil, Use(refuse, observe)).Err, errBusy)
	require.False(t, called, "the handler is not called")

	panics := func(context.Context, *Call, func(context.Context) error) error { panic("mw") }
	require.Error(t, run(h, 0, 1, nil, Use(panics)).Err)
}
