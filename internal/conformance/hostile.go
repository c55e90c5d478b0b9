package conformance

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Cases found by using seqbox as a hostile user would: data from outside
// (error text, headers) and misuse (typed nil connections, a handler that
// ignores its context) must never break bookkeeping, panic or hang.

// hostileErrorText holds every kind of byte a database may refuse in a
// string: NUL, invalid UTF-8, a lone surrogate, a truncated rune.
const hostileErrorText = "boom\x00 \xff\xfe \xed\xa0\x80 \xc3"

// testHandlerErrorTextAnyBytes: a transactional handler failing with
// hostile error text is counted like any failure (MaxAttempts applies) and
// its dead letter keeps the text, escaped; the partition moves on.
func testHandlerErrorTextAnyBytes(e *Env) {
	var calls atomic.Int32
	ob := e.Start(e.Builder().Queue("hostile", 1, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		if string(d.Payload) == "bad" {
			calls.Add(1)
			return errors.New(hostileErrorText)
		}
		return nil
	}), processor.MaxAttempts(3), processor.Retry(time.Millisecond, 5*time.Millisecond)))
	bad := enqueueOne(e, ob, "hostile", outbox.Message{PayloadType: "t", Payload: []byte("bad")})
	good := enqueueOne(e, ob, "hostile", outbox.Message{PayloadType: "t", Payload: []byte("good")})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, bad, good))
	// A failed batch of two is first retried alone, uncounted; then every
	// failure counts and MaxAttempts ends it.
	require.LessOrEqual(e.T, calls.Load(), int32(4))
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, bad[:], dls[0].MessageID)
	require.Equal(e.T, 3, dls[0].Attempts)
	require.Contains(e.T, dls[0].LastError, dialect.ErrorText(hostileErrorText))
}

// testLeasedBatchOutcomeWithHostileText: in leased mode the outcome of a
// batch whose failure text is hostile is recorded whole: the acked prefix
// is never redelivered, a rejected message is dead-lettered once, and the
// failing one is retried with its attempts counted.
func testLeasedBatchOutcomeWithHostileText(e *Env) {
	var mu sync.Mutex
	seen := map[string]int{}
	ob := e.Start(e.Builder().Queue("hostile", 1, processor.LeasedBatch(func(ctx context.Context, b *processor.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for i, d := range b.Messages {
			seen[string(d.Payload)]++
			switch string(d.Payload) {
			case "reject":
				b.Reject(errors.New("rejected: " + hostileErrorText))
			case "fail":
				if d.Attempts < 2 {
					return errors.New(hostileErrorText)
				}
				b.Ack(i + 1)
			default:
				b.Ack(i + 1)
			}
		}
		return nil
	}), processor.MaxAttempts(5), processor.Retry(time.Millisecond, 5*time.Millisecond)))
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "hostile", []outbox.Message{
			{PayloadType: "t", Payload: []byte("ok")},
			{PayloadType: "t", Payload: []byte("reject")},
			{PayloadType: "t", Payload: []byte("fail")},
			{PayloadType: "t", Payload: []byte("after")},
		})
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	mu.Lock()
	require.Equal(e.T, map[string]int{"ok": 1, "reject": 1, "fail": 3, "after": 1}, seen)
	mu.Unlock()
	dls := e.deadLetters()
	require.Len(e.T, dls, 1, "only the rejected message is dead-lettered")
	require.Equal(e.T, ids[1][:], dls[0].MessageID)
	require.Contains(e.T, dls[0].LastError, dialect.ErrorText(hostileErrorText))
}

// testHeadersExactOrRefused: headers that are not valid UTF-8 are refused
// with ErrInvalidHeaders and write nothing; any valid UTF-8, NUL and
// characters outside the BMP included, is delivered exactly.
func testHeadersExactOrRefused(e *Env) {
	got := make(chan map[string]string, 1)
	ob := e.Start(e.Builder().Queue("headers", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		got <- d.Headers
		return nil
	})))
	for name, h := range map[string]map[string]string{
		"invalid key":    {"\xc3(": "v"},
		"invalid value":  {"k": "\xff\xfe\xfd"},
		"lone surrogate": {"k": "\xed\xa0\x80"},
	} {
		_, err := ob.Enqueue(e.Ctx, e.DB, "headers", outbox.Message{PayloadType: "t", Headers: h})
		require.ErrorIs(e.T, err, outbox.ErrInvalidHeaders, name)
		var herr *outbox.HeaderError
		require.ErrorAs(e.T, err, &herr, name)
	}
	require.Zero(e.T, e.Count("body"), "refused headers wrote nothing")

	exact := map[string]string{"emoji 🙂": "日本語 🚀", "nul\x00key": "nul\x00value", "": "empty key", "quote\"\\": "\n\t\u2028"}
	id, err := ob.Enqueue(e.Ctx, e.DB, "headers", outbox.Message{PayloadType: "t", Headers: exact})
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, id))
	require.Equal(e.T, exact, <-got)
}

// testNilConnRefused: a typed nil connection returns ErrNilConn instead of
// panicking, and leaves the outbox able to enqueue (on SQLite a panic
// used to keep the process's single-writer lock for ever).
func testNilConnRefused(e *Env) {
	ob := e.Start(e.Builder().Queue("q", 1, nil))
	for name, conn := range map[string]bun.IConn{
		"nil":              nil,
		"(*sql.Tx)(nil)":   (*sql.Tx)(nil),
		"(*sql.DB)(nil)":   (*sql.DB)(nil),
		"(*sql.Conn)(nil)": (*sql.Conn)(nil),
		"(*bun.DB)(nil)":   (*bun.DB)(nil),
		"bun.Tx{}":         bun.Tx{},
		"bun.Conn{}":       bun.Conn{},
	} {
		require.NotPanics(e.T, func() {
			_, err := ob.Enqueue(e.Ctx, conn, "q", outbox.Message{PayloadType: "t"})
			require.ErrorIs(e.T, err, outbox.ErrNilConn, name)
		}, name)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	for _, conn := range []bun.IConn{e.DB, e.DB.DB} {
		_, err := ob.Enqueue(ctx, conn, "q", outbox.Message{PayloadType: "t"})
		require.NoError(e.T, err, "enqueue after refused nil connections")
	}
	require.Equal(e.T, 2, e.Count("body"))
}

// testQueueDefaultsEveryQueue: QueueDefaults' middleware wraps the
// handler calls of every queue, whatever its mode, and a default that does
// not apply to a queue (a lease on a transactional one) is left out, not
// an error.
func testQueueDefaultsEveryQueue(e *Env) {
	var seen sync.Map
	mw := func(ctx context.Context, call *processor.Call, next func(context.Context) error) error {
		seen.Store(call.Queue, true)
		return next(ctx)
	}
	ok := func(context.Context, processor.Delivery) error { return nil }
	ob := e.Start(e.Builder().QueueDefaults(processor.Use(mw), processor.Lease(5*time.Second, time.Second)).
		Queue("leased", 2, processor.Leased(ok)).
		Queue("tx", 2, processor.Transactional(func(context.Context, bun.Tx, processor.Delivery) error { return nil })))
	a := enqueueOne(e, ob, "leased", outbox.Message{Partition: 1, PayloadType: "t"})
	b := enqueueOne(e, ob, "tx", outbox.Message{Partition: 1, PayloadType: "t"})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, a, b))
	for _, q := range []string{"leased", "tx"} {
		_, ok := seen.Load(q)
		require.True(e.T, ok, "QueueDefaults middleware did not run for queue %s", q)
	}
}

// testConfigErrorsAllAtOnce: Start reports every configuration mistake at
// once, each a *ConfigError naming the Builder method it is about; an
// option given on a queue whose handler it does not apply to is one of
// them; nothing is registered.
func testConfigErrorsAllAtOnce(e *Env) {
	tx := processor.Transactional(func(context.Context, bun.Tx, processor.Delivery) error { return nil })
	leased := processor.Leased(func(context.Context, processor.Delivery) error { return nil })
	_, err := e.Builder().ProcessorConcurrency(-1).SequencerBatchSize(0).SequencerBatchSize(20000).
		Queue("tx", 1, tx, processor.Lease(time.Second, 100*time.Millisecond)).
		Queue("leased", 1, leased, processor.HandlerTimeout(time.Second), processor.BatchSize(-3)).
		Queue("only", 1, nil, processor.MaxAttempts(3)).
		Queue("bad name!", 1, nil).
		Start(e.Ctx)
	require.ErrorIs(e.T, err, seqbox.ErrInvalidConfig)
	var fields []string
	for _, err := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *seqbox.ConfigError
		require.ErrorAs(e.T, err, &ce)
		fields = append(fields, ce.Field)
	}
	require.ElementsMatch(e.T, []string{"ProcessorConcurrency", "SequencerBatchSize", "Queue(tx).Lease",
		"Queue(leased).HandlerTimeout", "Queue(leased).BatchSize", "Queue(only).MaxAttempts", "Queue[3]"}, fields, "%v", err)
	require.Equal(e.T, 0, e.Count("partitions"))
}

// testStopReturnsWhenContextEnds: Stop returns ctx's error as soon as its
// context ends, even while a handler ignores its own context; the message
// that handler held is not lost: a later outbox delivers it.
func testStopReturnsWhenContextEnds(e *Env) {
	release := make(chan struct{})
	var calls atomic.Int32
	started := make(chan struct{}, 1)
	handler := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-release // ignores ctx on purpose
		}
		return nil
	})
	lease := processor.Lease(time.Second, 200*time.Millisecond)
	ob, err := StartOutbox(e.Ctx, e.Builder().Queue("stubborn", 1, handler, lease))
	require.NoError(e.T, err)
	id := enqueueOne(e, ob, "stubborn", outbox.Message{PayloadType: "t"})
	<-started

	ctx, cancel := context.WithTimeout(e.Ctx, 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(e.T, ob.Stop(ctx), context.DeadlineExceeded)
	select {
	case <-ob.Stopped():
		e.T.Fatal("Stopped closed while a handler still runs")
	default:
	}
	close(release)
	<-ob.Stopped() // the handler returned; its ack could not commit

	next := e.Start(e.Builder().Queue("stubborn", 1, handler, lease))
	require.NoError(e.T, next.WaitProcessed(e.Ctx, id))
	require.GreaterOrEqual(e.T, calls.Load(), int32(1))
}
