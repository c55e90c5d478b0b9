package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

var errRollback = errors.New("roll back")

// recordingQueue registers queue with a leased handler that records every delivery.
func recordingQueue(b *seqbox.Builder, queue string, partitions int, rec *Recorder, opts ...processor.QueueOption) *seqbox.Builder {
	return b.Queue(queue, partitions, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	}), opts...)
}

// testAtomicEnqueue: a message exists iff the caller's transaction commits.
func testAtomicEnqueue(e *Env) {
	rec := NewRecorder()
	ob := e.Start(recordingQueue(e.Builder(), "orders", 4, rec))
	var rolledBack outbox.MessageID
	err := e.DB.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		id, err := ob.Enqueue(ctx, tx, "orders", outbox.Message{Partition: 1, PayloadType: "t", Payload: []byte("gone")})
		rolledBack = id
		require.NoError(e.T, err)
		return errRollback
	})
	require.ErrorIs(e.T, err, errRollback)
	require.Equal(e.T, 0, e.Count("body"))
	require.Equal(e.T, 0, e.Count("incoming"))

	var kept outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		kept, err = ob.Enqueue(ctx, tx, "orders", outbox.Message{Partition: 1, PayloadType: "t", Payload: []byte("kept")})
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, kept))
	// Give a wrongly delivered rolled-back message every chance to show up.
	require.NoError(e.T, ob.Reconcile(e.Ctx))
	time.Sleep(100 * time.Millisecond)
	require.Equal(e.T, 1, rec.Times(kept))
	require.Equal(e.T, 0, rec.Times(rolledBack))
	require.Equal(e.T, 1, rec.Len())
}

// testEnqueueConnKinds: every bun.IConn works: *bun.DB, bun.Tx, *sql.DB,
// *sql.Tx, bun.Conn; a rolled-back *sql.Tx leaves nothing.
func testEnqueueConnKinds(e *Env) {
	rec := NewRecorder()
	ob := e.Start(recordingQueue(e.Builder(), "kinds", 2, rec))
	msg := func(s string) outbox.Message {
		return outbox.Message{Key: s, PayloadType: "kind", Payload: []byte(s)}
	}
	var ids []outbox.MessageID
	add := func(id outbox.MessageID, err error) {
		e.T.Helper()
		require.NoError(e.T, err)
		ids = append(ids, id)
	}
	add(ob.Enqueue(e.Ctx, e.DB, "kinds", msg("bun.DB")))
	add(ob.Enqueue(e.Ctx, e.DB.DB, "kinds", msg("sql.DB")))
	require.NoError(e.T, e.DB.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		add(ob.Enqueue(ctx, tx, "kinds", msg("bun.Tx")))
		return nil
	}))
	sqlTx, err := e.DB.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	add(ob.Enqueue(e.Ctx, sqlTx, "kinds", msg("sql.Tx")))
	require.NoError(e.T, sqlTx.Commit())
	ob.Flush()

	rolled, err := e.DB.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	gone, err := ob.Enqueue(e.Ctx, rolled, "kinds", msg("rolled back"))
	require.NoError(e.T, err)
	require.NoError(e.T, rolled.Rollback())

	conn, err := e.DB.Conn(e.Ctx)
	require.NoError(e.T, err)
	add(ob.Enqueue(e.Ctx, conn, "kinds", msg("bun.Conn")))
	require.NoError(e.T, conn.Close())

	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	for _, id := range ids {
		require.Equal(e.T, 1, rec.Times(id))
	}
	require.Equal(e.T, 0, rec.Times(gone))
}

// testEnqueueBatchChunked: a batch larger than one chunk (by rows and by
// bytes) arrives whole, in order, with payload, key, type and headers
// intact.
func testEnqueueBatchChunked(e *Env) {
	enqueueBatchRoundTrip(e, 120, e.Builder().EnqueueChunk(7, 16<<10))
}

// testEnqueueBatchOneChunk: a batch of 100, one chunk by default (one
// prepared statement of exactly 100 rows on MySQL/MariaDB, packed values
// on PostgreSQL, pieces on SQLite), arrives as intact.
func testEnqueueBatchOneChunk(e *Env) {
	enqueueBatchRoundTrip(e, 100, e.Builder())
}

// enqueueBatchRoundTrip enqueues n messages in one EnqueueBatch to a queue
// of one partition of b and checks every delivery against what went in:
// payloads of every byte value (and empty), keys and headers with quotes
// and backslashes (and none).
func enqueueBatchRoundTrip(e *Env, n int, b *seqbox.Builder) {
	var deliveries []processor.Delivery
	done := make(chan struct{})
	b = b.Queue("chunks", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		deliveries = append(deliveries, d) // one partition: one task, no race
		if len(deliveries) == n {
			close(done)
		}
		return nil
	}))
	ob := e.Start(b)
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		payload := make([]byte, (i%5)*1500)
		for j := range payload {
			payload[j] = byte(i + j)
		}
		msgs[i] = outbox.Message{
			PayloadType: fmt.Sprintf("chunk.v%d", i%3),
			Payload:     payload,
			Headers:     map[string]string{"i": fmt.Sprint(i), "trace": strings.Repeat("x", i%4), "q": `'"\é`},
		}
		if i%2 == 0 {
			msgs[i].Key = fmt.Sprintf(`k'%d"\`, i)
		}
	}
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "chunks", msgs)
		return err
	}))
	require.Len(e.T, ids, n)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		e.T.Fatal("batch not delivered")
	}
	for i, d := range deliveries {
		require.Equal(e.T, ids[i], d.ID, "delivery %d out of enqueue order", i)
		require.Equal(e.T, int64(i+1), d.Seq)
		require.Equal(e.T, msgs[i].PayloadType, d.PayloadType)
		require.Equal(e.T, msgs[i].Key, d.Key)
		require.Equal(e.T, len(msgs[i].Payload), len(d.Payload))
		require.True(e.T, bytes.Equal(msgs[i].Payload, d.Payload), "delivery %d: payload", i)
		require.Equal(e.T, msgs[i].Headers, d.Headers)
		require.False(e.T, d.EnqueuedAt.IsZero())
		require.WithinDuration(e.T, time.Now(), d.EnqueuedAt, 5*time.Minute, "EnqueuedAt must be UTC-correct")
		require.Equal(e.T, "chunks", d.Queue)
	}
}

// testCallerOwnedTxPickedUpPromptly: an enqueue through a transaction the
// caller commits later is found by the maybe-dirty re-check, long before
// the reconciler scan or the poll would find it.
func testCallerOwnedTxPickedUpPromptly(e *Env) {
	rec := NewRecorder()
	b := recordingQueue(e.Builder(), "prompt", 2, rec).ReconcileInterval(time.Hour).PollInterval(time.Hour)
	ob := e.Start(b)
	var id outbox.MessageID
	start := time.Now()
	require.NoError(e.T, e.DB.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		id, err = ob.Enqueue(ctx, tx, "prompt", outbox.Message{Partition: 1, PayloadType: "t", Payload: []byte("x")})
		time.Sleep(50 * time.Millisecond) // the sequencer probes while this is still open
		return err
	}))
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	require.NoError(e.T, ob.WaitProcessed(ctx, id), "only the maybe-dirty re-check can deliver this")
	e.T.Logf("caller-owned transaction delivered %v after enqueue", time.Since(start).Round(time.Millisecond))
	require.Equal(e.T, 1, rec.Times(id))
}

// testBadInputWritesNothing: each invalid input returns its typed error and
// leaves every table as it was.
func testBadInputWritesNothing(e *Env) {
	ob := e.Start(e.Builder().Queue("orders", 4, nil).MaxPayloadBytes(1024))
	ok := outbox.Message{Partition: 0, PayloadType: "t", Payload: []byte("ok")}
	before := e.Counts()
	cases := []struct {
		name  string
		queue string
		msgs  []outbox.Message
		want  error
		check func(err error)
	}{
		{"invalid queue name", "bad queue!", []outbox.Message{ok}, outbox.ErrInvalidQueueName, func(err error) {
			var qe *outbox.QueueNameError
			require.ErrorAs(e.T, err, &qe)
			require.Equal(e.T, "bad queue!", qe.Name)
		}},
		{"empty queue name", "", []outbox.Message{ok}, outbox.ErrInvalidQueueName, nil},
		{"unregistered queue", "payments", []outbox.Message{ok}, outbox.ErrQueueNotRegistered, func(err error) {
			var qe *outbox.QueueError
			require.ErrorAs(e.T, err, &qe)
			require.Equal(e.T, "payments", qe.Queue)
		}},
		{"empty batch", "orders", nil, outbox.ErrEmptyBatch, nil},
		{"empty payload type", "orders", []outbox.Message{{PayloadType: "", Payload: []byte("x")}}, outbox.ErrInvalidPayloadType, nil},
		{"control char in payload type", "orders", []outbox.Message{{PayloadType: "a\nb"}}, outbox.ErrInvalidPayloadType, nil},
		{"oversize payload", "orders", []outbox.Message{ok, {PayloadType: "t", Payload: make([]byte, 1025)}}, outbox.ErrPayloadTooLarge, func(err error) {
			var me *outbox.MessageError
			require.ErrorAs(e.T, err, &me)
			require.Equal(e.T, 1, me.Index)
			require.Equal(e.T, 1025, me.Size)
			require.Equal(e.T, 1024, me.Max)
		}},
		{"oversize with headers", "orders", []outbox.Message{{PayloadType: "t", Payload: make([]byte, 1000),
			Headers: map[string]string{"k": strings.Repeat("v", 100)}}}, outbox.ErrPayloadTooLarge, nil},
		{"partition out of range", "orders", []outbox.Message{ok, ok, {Partition: 4, PayloadType: "t"}}, outbox.ErrPartitionOutOfRange, func(err error) {
			var me *outbox.MessageError
			require.ErrorAs(e.T, err, &me)
			require.Equal(e.T, 2, me.Index)
			require.Equal(e.T, 4, me.Partition)
		}},
		{"negative partition", "orders", []outbox.Message{{Partition: -1, PayloadType: "t"}}, outbox.ErrPartitionOutOfRange, nil},
		{"key and partition", "orders", []outbox.Message{{Key: "k", Partition: 2, PayloadType: "t"}}, outbox.ErrKeyAndPartition, nil},
	}
	for _, c := range cases {
		for _, conn := range []bun.IConn{e.DB, e.DB.DB} {
			_, err := ob.EnqueueBatch(e.Ctx, conn, c.queue, c.msgs)
			require.ErrorIs(e.T, err, c.want, c.name)
			if c.check != nil {
				c.check(err)
			}
		}
		// Inside a transaction that then commits: still nothing written.
		require.NoError(e.T, e.DB.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := ob.EnqueueBatch(ctx, tx, c.queue, c.msgs)
			require.ErrorIs(e.T, err, c.want, c.name)
			return nil
		}))
		require.Equal(e.T, before, e.Counts(), "%s wrote rows", c.name)
	}

	// Partition-count mismatch at registration: typed, and nothing changes.
	_, err := e.Builder().Queue("orders", 8, nil).Start(e.Ctx)
	require.ErrorIs(e.T, err, seqbox.ErrPartitionCountMismatch)
	var pce *outbox.PartitionCountError
	require.ErrorAs(e.T, err, &pce)
	require.Equal(e.T, "orders", pce.Queue)
	require.Equal(e.T, 4, pce.Registered)
	require.Equal(e.T, 8, pce.Requested)
	require.Equal(e.T, before, e.Counts())

	// Invalid configuration is an error from Start, never a panic, and writes nothing.
	for name, b := range map[string]*seqbox.Builder{
		"queue name":          e.Builder().Queue("no spaces", 1, nil),
		"zero partitions":     e.Builder().Queue("q", 0, nil),
		"too many partitions": e.Builder().Queue("q", outbox.MaxPartitions+1, nil),
		"duplicate queue":     e.Builder().Queue("q", 1, nil).Queue("q", 1, nil),
		"batch size":          e.Builder().Queue("q", 1, nil, processor.BatchSize(10001)),
		"lease headroom":      e.Builder().Queue("q", 1, nil, processor.Lease(time.Second, 2*time.Second)),
		"table prefix":        e.Builder().TablePrefix("Bad-Prefix"),
		"payload limit":       e.Builder().MaxPayloadBytes(1 << 30),
		"sequencer batch":     e.Builder().SequencerBatchSize(-1),
		"processor conc.":     e.Builder().ProcessorConcurrency(-2),
		"vacuum interval":     e.Builder().VacuumInterval(-time.Second),
		"rotate interval":     e.Builder().RotateInterval(time.Millisecond),
		"rotate size":         e.Builder().RotateSize(1024),
		"negative batch":      e.Builder().Queue("q", 1, nil, processor.BatchSize(-1)),
	} {
		ob, err := b.Start(e.Ctx)
		if err == nil {
			_ = ob.Stop(e.Ctx) // started by mistake: stop it before failing, so nothing runs past the test
		}
		require.ErrorIs(e.T, err, seqbox.ErrInvalidConfig, name)
	}
	require.Equal(e.T, before, e.Counts())
}

// testProducerOnlyInstanceConsumedElsewhere: a producer-only process runs no
// pipeline; another process sharing the database finds its rows (reconciler
// scan) and delivers them in order.
func testProducerOnlyInstanceConsumedElsewhere(e *Env) {
	producer := e.Start(e.Builder().ProducerOnly().Queue("shared", 2, nil))
	rec := NewRecorder()
	consumer := e.Start(recordingQueue(e.Builder(), "shared", 2, rec))
	var ids []outbox.MessageID
	for i := range 10 {
		require.NoError(e.T, producer.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
			id, err := producer.Enqueue(ctx, tx, "shared", outbox.Message{Partition: i % 2, PayloadType: "t"})
			ids = append(ids, id)
			return err
		}))
	}
	require.NoError(e.T, consumer.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []outbox.MessageID{ids[0], ids[2], ids[4], ids[6], ids[8]}, rec.IDs("shared", 0))
	require.Equal(e.T, []outbox.MessageID{ids[1], ids[3], ids[5], ids[7], ids[9]}, rec.IDs("shared", 1))
	_, err := e.Builder().ProducerOnly().Queue("shared", 2, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).Start(e.Ctx)
	require.ErrorIs(e.T, err, seqbox.ErrInvalidConfig, "a producer-only process runs no handlers")
}
