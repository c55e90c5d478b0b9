package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// purgeHandler is a handler of either mode around one function.
func purgeHandler(transactional bool, fn func(ctx context.Context, d processor.Delivery) error) processor.Handler {
	if transactional {
		return processor.Transactional(func(ctx context.Context, _ bun.Tx, d processor.Delivery) error { return fn(ctx, d) })
	}
	return processor.Leased(fn)
}

func testPurgeLeased(e *Env)        { testPurge(e, false) }
func testPurgeTransactional(e *Env) { testPurge(e, true) }

// testPurge: a purge by header removes a queue's undelivered messages from
// both stages: unsequenced ones are deleted, sequenced ones become
// tombstones that the processor passes over without a handler call,
// counting them, so every seq is still accounted for. A preview changes
// nothing. A matching message being delivered when the purge comes is
// left to that delivery: the purge waits for it and does not count it.
// Bad filters are refused and write nothing.
func testPurge(e *Env, transactional bool) {
	const queue = "tenants"
	t42 := map[string]string{"tenant": "42"}
	t7 := map[string]string{"tenant": "7", "region": "eu"}
	msg := func(part int, h map[string]string, payload string) outbox.Message {
		return outbox.Message{Partition: part, PayloadType: "t", Payload: []byte(payload), Headers: h}
	}
	prod := e.Start(e.Builder().ProducerOnly().Queue(queue, 2, nil))
	send := func(ob *Outbox, ms ...outbox.Message) []outbox.MessageID {
		ids, err := ob.EnqueueBatch(e.Ctx, e.DB, queue, ms)
		require.NoError(e.T, err)
		return ids
	}
	filter := outbox.PurgeFilter{Headers: t42}

	// Unsequenced (a producer-only process sequences nothing).
	first := send(prod, msg(0, t7, "gate"), msg(0, t42, "a1"), msg(0, t7, "b1"), msg(0, nil, "plain"),
		msg(1, t42, "a2"), msg(1, t7, "b2"))
	before := e.Counts()
	preview, err := prod.PreviewPurge(e.Ctx, queue, filter)
	require.NoError(e.T, err)
	require.Equal(e.T, 2, preview.Incoming)
	require.Zero(e.T, preview.Outgoing)
	require.Len(e.T, preview.Partitions, 2)
	require.Equal(e.T, before, e.Counts(), "a preview changes nothing")
	res, err := prod.Purge(e.Ctx, queue, filter)
	require.NoError(e.T, err)
	require.Equal(e.T, 2, res.Incoming)
	require.Zero(e.T, res.Outgoing)
	require.NoError(e.T, prod.WaitProcessed(e.Ctx, first[1], first[4]), "purged before a seq: gone, so done")
	later := send(prod, msg(0, t42, "a3"), msg(0, t42, "a4"), msg(0, t7, "b3"))

	// Sequenced, not delivered: the consumer parks partition 0 at its head.
	var mu sync.Mutex
	fixed := false
	delivered := map[string]int{}
	entered, release := make(chan struct{}), make(chan struct{})
	ob := e.Start(e.Builder().Queue(queue, 2, purgeHandler(transactional, func(ctx context.Context, d processor.Delivery) error {
		mu.Lock()
		gateShut := string(d.Payload) == "gate" && !fixed
		mu.Unlock()
		if gateShut {
			return context.DeadlineExceeded // any failure: MaxAttempts 1 parks
		}
		if string(d.Payload) == "slow" {
			close(entered)
			<-release
		}
		mu.Lock()
		delivered[string(d.Payload)]++
		mu.Unlock()
		return nil
	}), processor.OnFailure(processor.Park), processor.MaxAttempts(1)))
	admin := ob.Partitions()
	waitParked(e, admin, queue, 0)
	e.Eventually("everything sequenced", func() bool { return partitionStats(e, ob, queue, 0).Incoming == 0 })

	res, err = ob.Purge(e.Ctx, queue, filter)
	require.NoError(e.T, err)
	require.Zero(e.T, res.Incoming)
	require.Equal(e.T, 2, res.Outgoing, "a3 and a4 became tombstones")
	require.Equal(e.T, []outbox.PartitionPurge{{Partition: 0, Outgoing: 2}}, res.Partitions)
	mu.Lock()
	fixed = true
	mu.Unlock()
	_, err = admin.Resume(e.Ctx, queue, 0)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, append(first, later...)...), "tombstones are passed over")
	mu.Lock()
	require.Equal(e.T, map[string]int{"gate": 1, "b1": 1, "plain": 1, "b2": 1, "b3": 1}, delivered, "no purged message delivered")
	mu.Unlock()
	require.Equal(e.T, int64(2), ob.Counters().Purged)
	st := partitionStats(e, ob, queue, 0)
	require.Equal(e.T, st.Sequence, st.ProcessedSeq, "the cursor passed every seq, tombstones included")

	// A matching message in delivery: the purge waits and leaves it.
	slow := send(ob, msg(1, t42, "slow"))
	<-entered
	done := make(chan outbox.PurgeResult, 1)
	go func() {
		r, err := ob.Purge(e.Ctx, queue, filter)
		if err != nil {
			e.T.Errorf("purge: %v", err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		e.T.Fatalf("purge returned %+v while a matching message was in delivery", r)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	r := <-done
	require.Zero(e.T, r.Incoming+r.Outgoing, "the delivery won: nothing purged")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, slow...))
	mu.Lock()
	require.Equal(e.T, 1, delivered["slow"])
	mu.Unlock()

	// Bad input: typed errors, nothing written.
	before = e.Settled(ob)
	for _, bad := range []outbox.PurgeFilter{{}, {Headers: map[string]string{"": "x"}}, {Headers: map[string]string{"k": "\xff"}}} {
		_, err := ob.Purge(e.Ctx, queue, bad)
		require.ErrorIs(e.T, err, outbox.ErrInvalidPurgeFilter)
	}
	_, err = ob.Purge(e.Ctx, "no-such-queue", filter)
	require.ErrorIs(e.T, err, outbox.ErrQueueNotRegistered)
	_, err = ob.Purge(e.Ctx, "bad queue!", filter)
	require.ErrorIs(e.T, err, outbox.ErrInvalidQueueName)
	require.Equal(e.T, before, e.Counts())
}

// testPurgeRacesLease: a lease taken while a purge holds the partition's
// processor row waits for it, and then sees the purge's tombstones: its
// batch is never read from before the purge (on PostgreSQL the lease is
// one statement whose snapshot predates the purge's commit; it must
// notice and read again).
func testPurgeRacesLease(e *Env) {
	const queue = "race"
	prod := e.Start(e.Builder().ProducerOnly().Queue(queue, 1, nil))
	_, err := prod.EnqueueBatch(e.Ctx, e.DB, queue, []outbox.Message{
		{PayloadType: "t", Payload: []byte("1")}, {PayloadType: "t", Payload: []byte("2")}, {PayloadType: "t", Payload: []byte("3")},
	})
	require.NoError(e.T, err)
	pid := prod.PartitionIDs(queue)[0]
	moved, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
	require.NoError(e.T, err)
	require.Equal(e.T, 3, moved.Moved)

	// The purge's transaction, held open: it has the processor row and has
	// made seq 2 a tombstone.
	tx, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	_, err = tx.NewRaw("UPDATE ? SET purges = purges + 1 WHERE partition_id = ?", bun.Ident(e.Prefix+"processor"), pid).Exec(e.Ctx)
	require.NoError(e.T, err)
	e.MarkPurged(tx, pid, 2)

	type leased struct {
		res dialect.ProcessorLeaseResult
		err error
	}
	done := make(chan leased, 1)
	go func() {
		res, err := e.D.ProcessorLease(e.Ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "racer", Duration: time.Minute, Limit: 10})
		done <- leased{res, err}
	}()
	time.Sleep(300 * time.Millisecond) // let the lease start and wait on the row
	require.NoError(e.T, tx.Commit())
	got := <-done
	require.NoError(e.T, got.err)
	require.True(e.T, got.res.Leased)
	require.Len(e.T, got.res.Messages, 3)
	require.False(e.T, got.res.Messages[0].Purged)
	require.True(e.T, got.res.Messages[1].Purged, "the lease read its batch from before the purge")
	require.False(e.T, got.res.Messages[2].Purged)

	// The same race against an ack that takes the next lease at once
	// (engine.AckLeaser; one statement on PostgreSQL).
	al, ok := e.D.(engine.AckLeaser)
	if !ok {
		return
	}
	tx, err = e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	_, err = tx.NewRaw("UPDATE ? SET purges = purges + 1 WHERE partition_id = ?", bun.Ident(e.Prefix+"processor"), pid).Exec(e.Ctx)
	require.NoError(e.T, err)
	e.MarkPurged(tx, pid, 3)
	go func() {
		res, err := al.ProcessorAckLease(e.Ctx, &dialect.ProcessorAckLeaseParams{
			Ack:  dialect.ProcessorAdvance(pid, "racer", 1, nil),
			Next: &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "racer", Duration: time.Minute, Limit: 10},
		})
		done <- leased{res, err}
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(e.T, tx.Commit())
	got = <-done
	require.NoError(e.T, got.err)
	require.True(e.T, got.res.Leased)
	require.Len(e.T, got.res.Messages, 2)
	require.True(e.T, got.res.Messages[0].Purged)
	require.True(e.T, got.res.Messages[1].Purged, "the ack's next batch read from before the purge")
}
