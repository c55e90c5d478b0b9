package conformance

import (
	"context"
	"strings"
	"sync"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

type typedEvent struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

// testTypedHandlersAndMiddleware: values encoded with JSONMessage reach a
// processor.JSON handler decoded, in order; a payload that does not decode
// is dead-lettered with the decode error, never handed to the handler and
// never retried; middleware of the queue defaults and of the queue wrap
// every call, defaults outermost; the transactional form commits its
// effects. A value that does not encode is refused and writes nothing.
func testTypedHandlersAndMiddleware(e *Env) {
	var mu sync.Mutex
	var got []typedEvent
	var trace []string
	record := func(name string) processor.Middleware {
		return func(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
			mu.Lock()
			trace = append(trace, name+">"+c.Queue)
			mu.Unlock()
			return next(ctx)
		}
	}
	table := e.ScratchTable("typed_effects", "n INTEGER NOT NULL")
	ob := e.Start(e.Builder().QueueDefaults(processor.Use(record("defaults"))).
		Queue("typed", 1, processor.JSON(func(ctx context.Context, d processor.Typed[typedEvent]) error {
			mu.Lock()
			defer mu.Unlock()
			trace = append(trace, "handler")
			got = append(got, d.Value)
			return nil
		}), processor.Use(record("queue"))).
		Queue("typedtx", 1, processor.JSONTransactional(func(ctx context.Context, tx bun.Tx, d processor.Typed[typedEvent]) error {
			_, err := tx.NewRaw("INSERT INTO ? (n) VALUES (?)", bun.Ident(table), d.Value.N).Exec(ctx)
			return err
		})))

	var ids []outbox.MessageID
	for _, v := range []typedEvent{{1, "a"}, {2, "b"}} {
		m, err := outbox.JSONMessage("event.v1", v)
		require.NoError(e.T, err)
		id, err := ob.Enqueue(e.Ctx, e.DB, "typed", m)
		require.NoError(e.T, err)
		ids = append(ids, id)
	}
	bad, err := ob.Enqueue(e.Ctx, e.DB, "typed", outbox.Message{PayloadType: "event.v1", Payload: []byte(`{"n":"three"}`)})
	require.NoError(e.T, err)
	last, err := outbox.JSONMessage("event.v1", typedEvent{4, "d"})
	require.NoError(e.T, err)
	lastID, err := ob.Enqueue(e.Ctx, e.DB, "typed", last)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, append(ids, bad, lastID)...))

	mu.Lock()
	require.Equal(e.T, []typedEvent{{1, "a"}, {2, "b"}, {4, "d"}}, got)
	for i, step := range trace {
		// A call of a per-message handler covers a batch: the chain runs
		// once before the first message of each call.
		if step == "handler" && (i == 0 || trace[i-1] != "handler") {
			require.GreaterOrEqual(e.T, i, 2)
			require.Equal(e.T, []string{"defaults>typed", "queue>typed"}, trace[i-2:i], "defaults outermost, then the queue's")
		}
	}
	mu.Unlock()
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, bad[:], dls[0].MessageID)
	require.Contains(e.T, dls[0].LastError, "does not decode")
	require.Equal(e.T, 1, dls[0].Attempts, "rejected at once, never retried")

	m, err := outbox.JSONMessage("event.v1", typedEvent{7, "tx"})
	require.NoError(e.T, err)
	id, err := ob.Enqueue(e.Ctx, e.DB, "typedtx", m)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, id))
	var ns []int
	require.NoError(e.T, e.DB.NewRaw("SELECT n FROM ?", bun.Ident(table)).Scan(e.Ctx, &ns))
	require.Equal(e.T, []int{7}, ns)

	before := e.Settled(ob)
	_, err = outbox.JSONMessage("event.v1", make(chan int))
	require.ErrorIs(e.T, err, outbox.ErrUnencodable)
	_, err = outbox.NewMessage(nil, "event.v1", 1)
	require.ErrorIs(e.T, err, outbox.ErrUnencodable)
	require.True(e.T, strings.Contains(err.Error(), "nil codec"))
	require.Equal(e.T, before, e.Counts(), "nothing written")
}
