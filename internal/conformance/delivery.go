package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

var errFlaky = errors.New("flaky downstream")

func enqueueOne(e *Env, ob *Outbox, queue string, m outbox.Message) outbox.MessageID {
	e.T.Helper()
	var id outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		id, err = ob.Enqueue(ctx, tx, queue, m)
		return err
	}))
	return id
}

type deadLetterRow struct {
	MessageID   []byte `bun:"message_id"`
	Seq         int64  `bun:"seq"`
	PayloadType string `bun:"payload_type"`
	Payload     []byte `bun:"payload"`
	Status      string `bun:"status"`
	LastError   string `bun:"last_error"`
	Attempts    int    `bun:"attempts"`
}

func (e *Env) deadLetters() []deadLetterRow {
	var rows []deadLetterRow
	require.NoError(e.T, e.DB.NewRaw("SELECT message_id, seq, payload_type, payload, status, last_error, attempts FROM ? ORDER BY id",
		bun.Ident(e.Prefix+"dead_letters")).Scan(e.Ctx, &rows))
	return rows
}

// testAtLeastOnceRetry: a failing handler is retried with backoff until it
// succeeds; Attempts tells the handler how often it failed before.
func testAtLeastOnceRetry(e *Env) {
	var calls atomic.Int32
	var attemptsSeen []int
	var mu sync.Mutex
	ob := e.Start(e.Builder().Queue("flaky", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		mu.Lock()
		attemptsSeen = append(attemptsSeen, d.Attempts)
		mu.Unlock()
		if calls.Add(1) <= 2 {
			return errFlaky
		}
		return nil
	}), processor.Retry(5*time.Millisecond, 20*time.Millisecond)))
	id := enqueueOne(e, ob, "flaky", outbox.Message{PayloadType: "t", Payload: []byte("x")})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, id))
	require.Equal(e.T, int32(3), calls.Load())
	mu.Lock()
	require.Equal(e.T, []int{0, 1, 2}, attemptsSeen)
	mu.Unlock()
	// Counters move just after the ack commits that WaitProcessed sees.
	e.Eventually("counters", func() bool { c := ob.Counters(); return c.Delivered == 1 && c.Retried == 2 })
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	require.Zero(e.T, st.Partitions[0].Attempts, "success clears the head's failure count")
	require.Empty(e.T, st.Partitions[0].LastError)
}

// testRejectDeadLetters: Reject(err) sends that message to dead letters and
// the partition moves on; other messages are delivered in order.
func testRejectDeadLetters(e *Env) {
	rec := NewRecorder()
	ob := e.Start(e.Builder().Queue("poison", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if string(d.Payload) == "poison" {
			return processor.Reject(fmt.Errorf("cannot parse %q", d.Payload))
		}
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	})))
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "poison", []outbox.Message{
			{PayloadType: "t", Payload: []byte("a")},
			{PayloadType: "t.bad", Payload: []byte("poison")},
			{PayloadType: "t", Payload: []byte("c")},
		})
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []outbox.MessageID{ids[0], ids[2]}, rec.IDs("poison", 0))
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, ids[1][:], dls[0].MessageID)
	require.Equal(e.T, int64(2), dls[0].Seq)
	require.Equal(e.T, "t.bad", dls[0].PayloadType)
	require.Equal(e.T, []byte("poison"), dls[0].Payload)
	require.Equal(e.T, "pending", dls[0].Status)
	require.Contains(e.T, dls[0].LastError, "cannot parse")
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	require.Equal(e.T, int64(1), st.Partitions[0].DeadLetters["pending"])
	e.Eventually("dead-letter counter", func() bool { return ob.Counters().DeadLettered == 1 })
}

// testMaxAttemptsDeadLetters: after MaxAttempts failures the head goes to
// dead letters with its last error, and the partition moves on.
func testMaxAttemptsDeadLetters(e *Env) {
	rec := NewRecorder()
	var poisonCalls atomic.Int32
	ob := e.Start(e.Builder().Queue("limited", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if string(d.Payload) == "never" {
			poisonCalls.Add(1)
			return errFlaky
		}
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	}), processor.MaxAttempts(3), processor.Retry(2*time.Millisecond, 10*time.Millisecond)))
	bad := enqueueOne(e, ob, "limited", outbox.Message{PayloadType: "t", Payload: []byte("never")})
	good := enqueueOne(e, ob, "limited", outbox.Message{PayloadType: "t", Payload: []byte("fine")})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, bad, good))
	require.Equal(e.T, int32(3), poisonCalls.Load())
	require.Equal(e.T, []outbox.MessageID{good}, rec.IDs("limited", 0))
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, bad[:], dls[0].MessageID)
	require.Equal(e.T, 3, dls[0].Attempts)
	require.Contains(e.T, dls[0].LastError, errFlaky.Error())
}

// testPanicIsRetried: a panicking handler is recovered as an error and retried.
func testPanicIsRetried(e *Env) {
	var calls atomic.Int32
	ob := e.Start(e.Builder().Queue("panicky", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if calls.Add(1) == 1 {
			panic("handler bug")
		}
		return nil
	}), processor.Retry(time.Millisecond, 5*time.Millisecond)))
	id := enqueueOne(e, ob, "panicky", outbox.Message{PayloadType: "t"})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, id))
	require.Equal(e.T, int32(2), calls.Load())
}

// testBatchSizeFallsToOneAndRecovers: after a failure the batch shrinks to
// one message to isolate a poison message, then doubles back.
func testBatchSizeFallsToOneAndRecovers(e *Env) {
	var mu sync.Mutex
	var sizes []int
	failed := false
	ob := e.Start(e.Builder().Queue("adaptive", 1, processor.LeasedBatch(func(ctx context.Context, b *processor.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(b.Messages))
		if !failed {
			failed = true
			return errFlaky
		}
		return nil
	}), processor.BatchSize(8), processor.Retry(time.Millisecond, 2*time.Millisecond)))
	msgs := make([]outbox.Message, 40)
	for i := range msgs {
		msgs[i] = outbox.Message{PayloadType: "t"}
	}
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "adaptive", msgs)
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(e.T, len(sizes), 5)
	require.Equal(e.T, []int{8, 1, 2, 4, 8}, sizes[:5], "sizes: %v", sizes)
}

// testLeasedBatchPartialAck: a batch handler that acks a prefix and then
// fails keeps the prefix; only the rest comes again.
func testLeasedBatchPartialAck(e *Env) {
	rec := NewRecorder()
	var once atomic.Bool
	ob := e.Start(e.Builder().Queue("prefix", 1, processor.LeasedBatch(func(ctx context.Context, b *processor.Batch) error {
		for i, d := range b.Messages {
			if i == 2 && once.CompareAndSwap(false, true) {
				return errFlaky
			}
			rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
			b.Ack(i + 1)
		}
		return nil
	}), processor.Retry(time.Millisecond, 2*time.Millisecond)))
	msgs := make([]outbox.Message, 5)
	for i := range msgs {
		msgs[i] = outbox.Message{PayloadType: "t"}
	}
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "prefix", msgs)
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, ids, rec.IDs("prefix", 0), "acked prefix not redelivered")
}

// testTransactionalExactlyOnce: the handler's write and the ack commit
// together or not at all: a failing handler leaves no row and the message
// comes again; a succeeding one leaves exactly one row per message.
func testTransactionalExactlyOnce(e *Env) {
	table := e.ScratchTable("effects", "message_id VARCHAR(64) NOT NULL, attempt INTEGER NOT NULL")

	var mu sync.Mutex
	calls := map[outbox.MessageID]int{}
	ob := e.Start(e.Builder().Queue("ledger", 2, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		mu.Lock()
		calls[d.ID]++
		n := calls[d.ID]
		mu.Unlock()
		if _, err := tx.NewRaw("INSERT INTO ? (message_id, attempt) VALUES (?, ?)", bun.Ident(table), d.ID.String(), n).Exec(ctx); err != nil {
			return err
		}
		if d.Seq%3 == 0 && n == 1 {
			return errFlaky // after writing: the write must roll back
		}
		return nil
	}), processor.Retry(time.Millisecond, 5*time.Millisecond), processor.BatchSize(4)))
	msgs := make([]outbox.Message, 24)
	for i := range msgs {
		msgs[i] = outbox.Message{Key: fmt.Sprint("acct-", i%5), PayloadType: "ledger.entry"}
	}
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "ledger", msgs)
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	var rows []struct {
		MessageID string `bun:"message_id"`
		N         int    `bun:"n"`
	}
	require.NoError(e.T, e.DB.NewRaw("SELECT message_id, COUNT(*) AS n FROM ? GROUP BY message_id", bun.Ident(table)).Scan(e.Ctx, &rows))
	require.Len(e.T, rows, len(ids))
	for _, r := range rows {
		require.Equal(e.T, 1, r.N, "message %s has %d effect rows", r.MessageID, r.N)
	}
	mu.Lock()
	defer mu.Unlock()
	retried := 0
	for _, n := range calls {
		if n > 1 {
			retried++
		}
	}
	require.Positive(e.T, retried, "some messages must have failed once and come again")
}

// testTransactionalRejectAndMaxAttempts: in transactional mode a rejected
// or exhausted message is dead-lettered without its writes.
func testTransactionalRejectAndMaxAttempts(e *Env) {
	table := e.ScratchTable("tx_effects", "payload VARCHAR(64) NOT NULL")
	ob := e.Start(e.Builder().Queue("txdl", 1, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		if _, err := tx.NewRaw("INSERT INTO ? (payload) VALUES (?)", bun.Ident(table), string(d.Payload)).Exec(ctx); err != nil {
			return err
		}
		switch string(d.Payload) {
		case "reject":
			return processor.Reject(errors.New("invalid"))
		case "fail":
			return errFlaky
		}
		return nil
	}), processor.MaxAttempts(2), processor.Retry(time.Millisecond, 2*time.Millisecond)))
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "txdl", []outbox.Message{
			{PayloadType: "t", Payload: []byte("a")}, {PayloadType: "t", Payload: []byte("reject")},
			{PayloadType: "t", Payload: []byte("fail")}, {PayloadType: "t", Payload: []byte("b")},
		})
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	var payloads []string
	require.NoError(e.T, e.DB.NewRaw("SELECT payload FROM ? ORDER BY payload", bun.Ident(table)).Scan(e.Ctx, &payloads))
	require.Equal(e.T, []string{"a", "b"}, payloads)
	dls := e.deadLetters()
	require.Len(e.T, dls, 2)
	require.Equal(e.T, ids[1][:], dls[0].MessageID)
	require.Equal(e.T, ids[2][:], dls[1].MessageID)
	require.Equal(e.T, 2, dls[1].Attempts)
}

// testCrashedLeaseIsRedelivered: a batch leased by an instance that stops
// without acking is delivered by another instance once the lease expires,
// and carries Attempts >= 1.
func testCrashedLeaseIsRedelivered(e *Env) {
	got := make(chan struct{})
	var gotOnce sync.Once
	lease := processor.Lease(1500*time.Millisecond, 500*time.Millisecond)
	a := e.Start(e.Builder().InstanceID("instance-a").Queue("crash", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		gotOnce.Do(func() { close(got) })
		<-ctx.Done() // hangs until the process "dies"
		return ctx.Err()
	}), lease))
	id := enqueueOne(e, a, "crash", outbox.Message{PayloadType: "t", Payload: []byte("x")})
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		e.T.Fatal("instance A never received the message")
	}
	dead, cancel := context.WithCancel(e.Ctx)
	cancel()
	require.ErrorIs(e.T, a.Stop(dead), context.Canceled) // hard stop: nothing acked, lease left behind

	redelivered := make(chan processor.Delivery, 1)
	b := e.Start(e.Builder().InstanceID("instance-b").Queue("crash", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		select {
		case redelivered <- d:
		default:
		}
		return nil
	}), lease))
	select {
	case d := <-redelivered:
		require.Equal(e.T, id, d.ID)
		require.GreaterOrEqual(e.T, d.Attempts, 1, "a redelivery after a crash carries Attempts > 0")
	case <-time.After(30 * time.Second):
		e.T.Fatal("instance B never redelivered the message")
	}
	require.NoError(e.T, b.WaitProcessed(e.Ctx, id))
}

// testStopDrainsInFlight: Stop lets an in-flight batch finish and ack.
func testStopDrainsInFlight(e *Env) {
	started := make(chan struct{})
	var finished atomic.Bool
	ob, err := StartOutbox(e.Ctx, e.Builder().Queue("drain", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return nil
	})))
	require.NoError(e.T, err)
	id := enqueueOne(e, ob, "drain", outbox.Message{PayloadType: "t"})
	<-started
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	require.NoError(e.T, ob.Stop(ctx))
	require.True(e.T, finished.Load())
	require.NoError(e.T, ob.WaitProcessed(ctx, id), "the drained batch was acked")
	_, err = ob.Enqueue(e.Ctx, e.DB, "drain", outbox.Message{PayloadType: "t"})
	require.ErrorIs(e.T, err, outbox.ErrStopped)
	require.NoError(e.T, ob.Stop(ctx), "Stop is idempotent")
}

// testStopReleasesLeases: a clean ack takes the partition's next lease in
// the same transaction; a graceful Stop must give such a lease back with
// the head's attempt count restored, so another instance continues at once
// (not after the lease expires) and sees no phantom failed delivery.
func testStopReleasesLeases(e *Env) {
	const total = 40
	lease := processor.Lease(time.Hour, time.Minute)
	var delivered atomic.Int64
	a := e.Start(e.Builder().InstanceID("instance-a").Queue("handover", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		delivered.Add(1)
		time.Sleep(5 * time.Millisecond)
		return nil
	}), lease, processor.BatchSize(1)))
	msgs := make([]outbox.Message, total)
	for i := range msgs {
		msgs[i] = outbox.Message{PayloadType: "t", Payload: []byte{byte(i)}}
	}
	ids, err := a.EnqueueBatch(e.Ctx, e.DB, "handover", msgs)
	require.NoError(e.T, err)
	e.Eventually("a few deliveries", func() bool { return delivered.Load() >= 5 })
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	require.NoError(e.T, a.Stop(ctx))

	var row struct {
		LockedBy *string `bun:"locked_by"`
		Attempts int     `bun:"attempts"`
	}
	require.NoError(e.T, e.DB.NewRaw("SELECT locked_by, attempts FROM ?", bun.Ident(e.Prefix+"processor")).Scan(e.Ctx, &row))
	require.Nil(e.T, row.LockedBy, "a graceful stop leaves no lease behind")
	require.Zero(e.T, row.Attempts, "and counts no attempt for a batch it never delivered")

	rec := NewRecorder()
	b := e.Start(recordingQueue(e.Builder().InstanceID("instance-b"), "handover", 1, rec, lease))
	waitCtx, cancelWait := context.WithTimeout(e.Ctx, 30*time.Second) // far below the one-hour lease
	defer cancelWait()
	require.NoError(e.T, b.WaitProcessed(waitCtx, ids...))
	require.Equal(e.T, total, int(delivered.Load())+rec.Len(), "every message exactly once across the handover")
}
