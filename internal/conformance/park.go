package conformance

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// parkOptions: park after two failed deliveries, retried quickly.
func parkOptions() []processor.QueueOption {
	return []processor.QueueOption{processor.MaxAttempts(2), processor.Retry(2*time.Millisecond, 5*time.Millisecond),
		processor.OnFailure(processor.Park)}
}

// failBad is a leased handler that fails payloads starting with "bad"
// until fixed is set, recording what it delivers.
func failBad(rec *Recorder, fixed *atomic.Bool) processor.Handler {
	return processor.Leased(failBadFunc(rec, fixed))
}

func failBadFunc(rec *Recorder, fixed *atomic.Bool) func(ctx context.Context, d processor.Delivery) error {
	return func(ctx context.Context, d processor.Delivery) error {
		if strings.HasPrefix(string(d.Payload), "bad") && !fixed.Load() {
			return errors.New("cannot handle " + string(d.Payload) + " yet")
		}
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	}
}

// enqueueAll enqueues one message per payload into a partition, each in
// its own transaction, without waiting for them.
func enqueueAll(e *Env, ob *Outbox, queue string, partition int, payloads ...string) []outbox.MessageID {
	var ids []outbox.MessageID
	for _, p := range payloads {
		id, err := ob.Enqueue(e.Ctx, e.DB, queue, outbox.Message{Partition: partition, PayloadType: "t", Payload: []byte(p)})
		require.NoError(e.T, err)
		ids = append(ids, id)
	}
	return ids
}

// partitionStats returns one partition's row of the stats.
func partitionStats(e *Env, ob *Outbox, queue string, partition int) outbox.PartitionStats {
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	for _, p := range st.Partitions {
		if p.Queue == queue && p.Partition == partition {
			return p
		}
	}
	e.T.Fatalf("no stats for %s/%d", queue, partition)
	return outbox.PartitionStats{}
}

// waitParked waits until the admin reports the partition parked.
func waitParked(e *Env, admin *seqbox.Partitions, queue string, partition int) seqbox.Parked {
	e.T.Helper()
	var got seqbox.Parked
	e.Eventually(queue+" parked", func() bool {
		list, err := admin.Parked(e.Ctx, queue)
		require.NoError(e.T, err)
		for _, p := range list {
			if p.Partition == partition {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// quietFor gives the pipeline time to do what it must not (deliver past
// a parked head): a negative check, bounded, not a timing assertion.
func quietFor(e *Env, ob *Outbox) {
	for range 3 {
		time.Sleep(60 * time.Millisecond) // longer than the poll interval
		ob.Flush()
	}
}

// testParkStopsPartitionAndResume: under the Park policy a head that fails
// MaxAttempts times stops its partition (nothing behind it is delivered;
// other partitions go on), shows in Stats with its error, and writes no
// dead letter; Resume retries it at once and the rest follows in order.
func testParkStopsPartitionAndResume(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("park", 2, failBad(rec, &fixed), parkOptions()...))
	p0 := enqueueAll(e, ob, "park", 0, "a", "bad", "b", "c")
	p1 := enqueueAll(e, ob, "park", 1, "x", "y")
	admin := ob.Partitions()
	parked := waitParked(e, admin, "park", 0)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, p1...), "other partitions go on")
	require.Equal(e.T, int64(2), parked.HeadSeq)
	require.Equal(e.T, 2, parked.Attempts)
	require.Contains(e.T, parked.LastError, "cannot handle bad yet")
	require.False(e.T, parked.ParkedAt.IsZero())

	quietFor(e, ob)
	require.Equal(e.T, []outbox.MessageID{p0[0]}, rec.IDs("park", 0), "nothing overtakes the parked head")
	require.Empty(e.T, e.deadLetters(), "parking writes no dead letter")
	require.Equal(e.T, int64(1), ob.Counters().Parked)
	st := partitionStats(e, ob, "park", 0)
	require.True(e.T, st.Parked)
	require.Equal(e.T, int64(3), st.Unprocessed)
	require.Contains(e.T, st.LastError, "cannot handle bad yet")
	require.False(e.T, st.OldestUnprocessed.IsZero(), "the parked head is the oldest unprocessed message")
	full, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	require.Len(e.T, full.Queues, 1)
	require.Equal(e.T, 1, full.Queues[0].Parked)
	require.Equal(e.T, int64(3), full.Queues[0].Unprocessed)

	fixed.Store(true)
	was, err := admin.Resume(e.Ctx, "park", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, parked.HeadSeq, was.HeadSeq)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, p0...))
	require.Equal(e.T, p0, rec.IDs("park", 0), "the head, then the rest, in order")
	for _, id := range p0 {
		require.Equal(e.T, 1, rec.Times(id))
	}
	require.False(e.T, partitionStats(e, ob, "park", 0).Parked)
	require.Empty(e.T, e.deadLetters())

	_, err = admin.Resume(e.Ctx, "park", 0)
	require.ErrorIs(e.T, err, seqbox.ErrNotParked)
	var pe *seqbox.PartitionError
	require.ErrorAs(e.T, err, &pe)
	require.Equal(e.T, 0, pe.Partition)
	_, err = admin.Resume(e.Ctx, "park", 7)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)
	_, err = admin.Skip(e.Ctx, "no-such-queue", 0)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)
}

// testParkSkip: Skip dead-letters the parked head (its attempts and
// error kept) and the rest of the partition is delivered in order.
func testParkSkip(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("skip", 1, failBad(rec, &fixed), parkOptions()...))
	ids := enqueueAll(e, ob, "skip", 0, "a", "bad", "b")
	admin := ob.Partitions()
	waitParked(e, admin, "skip", 0)
	skipped, err := admin.Skip(e.Ctx, "skip", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, ids[1], skipped.MessageID)
	require.Equal(e.T, int64(2), skipped.HeadSeq)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []outbox.MessageID{ids[0], ids[2]}, rec.IDs("skip", 0))

	letter, err := ob.DeadLetters().Get(e.Ctx, ids[1])
	require.NoError(e.T, err)
	require.Equal(e.T, deadletter.StatusPending, letter.Status)
	require.Equal(e.T, 2, letter.Attempts)
	require.Equal(e.T, int64(2), letter.Seq)
	require.Contains(e.T, letter.LastError, "skipped by an operator")
	require.Contains(e.T, letter.LastError, "cannot handle bad yet")
	_, err = admin.Skip(e.Ctx, "skip", 0)
	require.ErrorIs(e.T, err, seqbox.ErrNotParked)
	require.Len(e.T, e.deadLetters(), 1)
}

// testParkAcrossRestart: the park is in the database: a process started
// after the one that parked the partition leaves it parked, and an admin
// without a pipeline (seqbox.Partitions, as the CLI uses) resumes it for
// that process, which picks it up at its next poll.
func testParkAcrossRestart(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	first, err := StartOutbox(e.Ctx, e.Builder().InstanceID("first").Queue("restart", 1, failBad(rec, &fixed), parkOptions()...))
	require.NoError(e.T, err)
	ids := enqueueAll(e, first, "restart", 0, "bad", "a")
	admin, err := partitionsAdmin(e)
	require.NoError(e.T, err)
	waitParked(e, admin, "restart", 0)
	stopCtx, cancel := context.WithTimeout(e.Ctx, 10*time.Second)
	require.NoError(e.T, first.Stop(stopCtx))
	cancel()

	fixed.Store(true)
	second := e.Start(e.Builder().InstanceID("second").Queue("restart", 1, failBad(rec, &fixed), parkOptions()...))
	quietFor(e, second)
	require.Zero(e.T, rec.Len(), "still parked after the restart, though the handler would now succeed")
	_, err = admin.Resume(e.Ctx, "restart", 0)
	require.NoError(e.T, err)
	require.NoError(e.T, second.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, ids, rec.IDs("restart", 0))
}

// testParkTransactional: the Park policy in transactional mode: the
// failed head's effects roll back, the partition parks, and after Resume
// every message's effect is written exactly once, in order.
func testParkTransactional(e *Env) {
	table := e.ScratchTable("park_effects", "n INTEGER NOT NULL, payload VARCHAR(64) NOT NULL")
	var fixed atomic.Bool
	var n atomic.Int64
	ob := e.Start(e.Builder().Queue("txpark", 1, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		if _, err := tx.NewRaw("INSERT INTO ? (n, payload) VALUES (?, ?)", bun.Ident(table), n.Add(1), string(d.Payload)).Exec(ctx); err != nil {
			return err
		}
		if string(d.Payload) == "bad" && !fixed.Load() {
			return errFlaky
		}
		return nil
	}), parkOptions()...))
	ids := enqueueAll(e, ob, "txpark", 0, "a", "bad", "b")
	admin := ob.Partitions()
	parked := waitParked(e, admin, "txpark", 0)
	require.Equal(e.T, int64(2), parked.HeadSeq)
	require.Contains(e.T, parked.LastError, errFlaky.Error())
	quietFor(e, ob)
	effects := func() []string {
		var got []string
		require.NoError(e.T, e.DB.NewRaw("SELECT payload FROM ? ORDER BY n", bun.Ident(table)).Scan(e.Ctx, &got))
		return got
	}
	require.Equal(e.T, []string{"a"}, effects(), "the failed head's effects rolled back; b waits")
	fixed.Store(true)
	_, err := admin.Resume(e.Ctx, "txpark", 0)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []string{"a", "bad", "b"}, effects())
	require.Empty(e.T, e.deadLetters())
}

// testParkOperatorsRace: two operators skip (or one skips and one
// resumes) the same parked partition at once: exactly one acts, the other
// gets ErrNotParked, and the head is dead-lettered at most once. While the
// operators race, deliveries wait: a resume that wins first would
// otherwise let the head fail twice more and park again before the skip
// reads the row, and the skip would then act on a second parking, not on
// the one it raced for.
func testParkOperatorsRace(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	var hold atomic.Pointer[chan struct{}]
	bad := failBadFunc(rec, &fixed)
	ob := e.Start(e.Builder().Queue("race", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if h := hold.Load(); h != nil {
			select {
			case <-*h:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return bad(ctx, d)
	}), parkOptions()...))
	for round := range 3 {
		ids := enqueueAll(e, ob, "race", 0, "bad", "ok")
		waitParked(e, ob.Partitions(), "race", 0)
		held := make(chan struct{})
		hold.Store(&held)
		admins := []*seqbox.Partitions{ob.Partitions(), ob.Partitions()}
		if a, err := partitionsAdmin(e); err == nil {
			admins[1] = a
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				if i == 1 && round == 2 {
					_, errs[i] = admins[i].Resume(e.Ctx, "race", 0)
					return
				}
				_, errs[i] = admins[i].Skip(e.Ctx, "race", 0)
			})
		}
		wg.Wait()
		hold.Store(nil)
		close(held)
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.ErrorIs(e.T, err, seqbox.ErrNotParked)
			}
		}
		require.Equal(e.T, 1, won, "round %d: exactly one operator acts", round)
		if errs[0] != nil && round == 2 {
			// The resume won: the head is retried and parks again; skip it.
			waitParked(e, ob.Partitions(), "race", 0)
			_, err := ob.Partitions().Skip(e.Ctx, "race", 0)
			require.NoError(e.T, err)
		}
		require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
		require.Len(e.T, e.deadLetters(), round+1, "one dead letter per round")
	}
}

// retryLater: a failed head is retried an hour later, so a partition
// stays retrying for as long as a test looks at it.
func retryLater(maxAttempts int) []processor.QueueOption {
	return []processor.QueueOption{processor.MaxAttempts(maxAttempts), processor.Retry(time.Hour, time.Hour)}
}

// waitRetrying waits until the admin lists the partition as retrying.
func waitRetrying(e *Env, admin *seqbox.Partitions, queue string, partition int) seqbox.PartitionState {
	e.T.Helper()
	var got seqbox.PartitionState
	e.Eventually(queue+" retrying", func() bool {
		list, err := admin.Failing(e.Ctx, queue)
		require.NoError(e.T, err)
		for _, p := range list {
			if p.Partition == partition && p.State == seqbox.StateRetrying && !p.InFlight {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// testPartitionRetryNow: a retrying partition (policy DeadLetter, next
// retry an hour away) is listed with its head's failure; RetryNow makes
// the head due at once keeping its attempt count, so its next failure is
// the MaxAttempts-th and dead-letters it; a partition that is not
// retrying is refused with typed errors, changing nothing.
func testPartitionRetryNow(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("retry", 2, failBad(rec, &fixed), retryLater(2)...))
	ids := enqueueAll(e, ob, "retry", 0, "a", "bad", "b")
	admin := ob.Partitions()
	st := waitRetrying(e, admin, "retry", 0)
	require.Equal(e.T, int64(2), st.HeadSeq)
	require.Equal(e.T, 1, st.Attempts)
	require.Contains(e.T, st.LastError, "cannot handle bad yet")
	require.False(e.T, st.NextAttemptAt.IsZero(), "the retry is pending")
	require.True(e.T, st.ParkedAt.IsZero())
	one, err := admin.State(e.Ctx, "retry", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, st, one)
	require.NoError(e.T, one.Check(seqbox.ActionRetry))
	require.NoError(e.T, one.Check(seqbox.ActionSkip))
	require.ErrorIs(e.T, one.Check(seqbox.ActionResume), seqbox.ErrNotParked)
	parked, err := admin.Parked(e.Ctx, "retry")
	require.NoError(e.T, err)
	require.Empty(e.T, parked, "retrying is not parked")
	quietFor(e, ob)
	require.Equal(e.T, []outbox.MessageID{ids[0]}, rec.IDs("retry", 0), "the head waits for its retry")

	was, err := admin.RetryNow(e.Ctx, "retry", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, 1, was.Attempts)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []outbox.MessageID{ids[0], ids[2]}, rec.IDs("retry", 0))
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, 2, dls[0].Attempts, "the attempt count was kept: the retry was the MaxAttempts-th")
	require.Contains(e.T, dls[0].LastError, "cannot handle bad yet")

	_, err = admin.RetryNow(e.Ctx, "retry", 0)
	require.ErrorIs(e.T, err, seqbox.ErrNotRetrying)
	var pe *seqbox.PartitionError
	require.ErrorAs(e.T, err, &pe)
	require.Equal(e.T, seqbox.ActionRetry, pe.Action)
	_, err = admin.Skip(e.Ctx, "retry", 1)
	require.ErrorIs(e.T, err, seqbox.ErrNotRetrying, "an idle partition has nothing to skip")
	require.ErrorIs(e.T, err, seqbox.ErrNotParked)
	_, err = admin.RetryNow(e.Ctx, "retry", 9)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)
	_, err = admin.State(e.Ctx, "nope", 0)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)
	list, err := admin.Failing(e.Ctx, "")
	require.NoError(e.T, err)
	require.Empty(e.T, list)
	require.Len(e.T, e.deadLetters(), 1, "the refusals changed nothing")

	// A parked partition is not retrying: RetryNow refuses it (Resume
	// retries it with fresh attempts).
	fixed.Store(false)
	pob := e.Start(e.Builder().InstanceID("parking").Queue("retrypark", 1, failBad(rec, &fixed), parkOptions()...))
	enqueueAll(e, pob, "retrypark", 0, "bad")
	waitParked(e, admin, "retrypark", 0)
	_, err = admin.RetryNow(e.Ctx, "retrypark", 0)
	require.ErrorIs(e.T, err, seqbox.ErrNotRetrying)
	st, err = admin.State(e.Ctx, "retrypark", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, seqbox.StateParked, st.State)
}

// testPartitionSkipRetrying: Skip dead-letters the head of a retrying
// partition (its attempts and error kept, noting the skip) without
// waiting for MaxAttempts, and the rest is delivered in order.
func testPartitionSkipRetrying(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("skipretry", 1, failBad(rec, &fixed), retryLater(5)...))
	ids := enqueueAll(e, ob, "skipretry", 0, "a", "bad", "b")
	admin := ob.Partitions()
	waitRetrying(e, admin, "skipretry", 0)
	skipped, err := admin.Skip(e.Ctx, "skipretry", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, seqbox.StateRetrying, skipped.State)
	require.Equal(e.T, ids[1], skipped.MessageID)
	require.Equal(e.T, int64(2), skipped.HeadSeq)
	require.True(e.T, skipped.ParkedAt.IsZero())
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, []outbox.MessageID{ids[0], ids[2]}, rec.IDs("skipretry", 0))
	dls := e.deadLetters()
	require.Len(e.T, dls, 1)
	require.Equal(e.T, 1, dls[0].Attempts)
	require.Contains(e.T, dls[0].LastError, "skipped by an operator while retrying")
	require.Contains(e.T, dls[0].LastError, "cannot handle bad yet")
	_, err = admin.Skip(e.Ctx, "skipretry", 0)
	require.ErrorIs(e.T, err, seqbox.ErrNotParked)
	require.Len(e.T, e.deadLetters(), 1)
}

// testPartitionBusyRefused: while a retried head is being delivered (its
// lease live) RetryNow and Skip refuse the partition with
// ErrPartitionBusy, changing nothing; the delivery then completes.
func testPartitionBusyRefused(e *Env) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	ob := e.Start(e.Builder().Queue("busy", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if string(d.Payload) != "slow" {
			return nil
		}
		switch calls.Add(1) {
		case 1:
			return errors.New("first try fails")
		case 2:
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}), append(retryLater(5), processor.Lease(5*time.Minute, time.Minute))...))
	ids := enqueueAll(e, ob, "busy", 0, "slow", "after")
	admin := ob.Partitions()
	waitRetrying(e, admin, "busy", 0)
	_, err := admin.RetryNow(e.Ctx, "busy", 0)
	require.NoError(e.T, err)
	select {
	case <-started:
	case <-e.Ctx.Done():
		e.T.Fatal("the retried head was never delivered")
	}
	st, err := admin.State(e.Ctx, "busy", 0)
	require.NoError(e.T, err)
	require.True(e.T, st.InFlight)
	require.Equal(e.T, seqbox.StateRetrying, st.State, "the head's failure stays recorded while it is retried")
	require.ErrorIs(e.T, st.Check(seqbox.ActionSkip), seqbox.ErrPartitionBusy)
	list, err := admin.Failing(e.Ctx, "busy")
	require.NoError(e.T, err)
	require.Len(e.T, list, 1)
	require.True(e.T, list[0].InFlight)
	_, err = admin.RetryNow(e.Ctx, "busy", 0)
	require.ErrorIs(e.T, err, seqbox.ErrPartitionBusy)
	_, err = admin.Skip(e.Ctx, "busy", 0)
	require.ErrorIs(e.T, err, seqbox.ErrPartitionBusy)
	close(release)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Empty(e.T, e.deadLetters(), "the refused skip wrote no dead letter")
	require.Equal(e.T, int32(2), calls.Load())
}

// testPartitionAdminWaitsForDelivery: in transactional mode a delivery
// holds the partition's row lock; an operator's action waits for it and
// then sees the row as the delivery left it (here: delivered, so there is
// nothing to retry).
func testPartitionAdminWaitsForDelivery(e *Env) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	ob := e.Start(e.Builder().Queue("txwait", 1, processor.Transactional(func(ctx context.Context, _ bun.Tx, d processor.Delivery) error {
		switch calls.Add(1) {
		case 1:
			return errFlaky
		case 2:
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}), retryLater(5)...))
	ids := enqueueAll(e, ob, "txwait", 0, "m")
	admin := ob.Partitions()
	waitRetrying(e, admin, "txwait", 0)
	_, err := admin.RetryNow(e.Ctx, "txwait", 0)
	require.NoError(e.T, err)
	select {
	case <-started:
	case <-e.Ctx.Done():
		e.T.Fatal("the retried head was never delivered")
	}
	done := make(chan error, 1)
	go func() {
		_, err := admin.RetryNow(e.Ctx, "txwait", 0)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // a negative check: the action has had time to return, and must not
	select {
	case err := <-done:
		e.T.Fatalf("RetryNow returned (%v) while the delivery held the row lock", err)
	default:
	}
	close(release)
	require.ErrorIs(e.T, <-done, seqbox.ErrNotRetrying, "it saw the row as the delivery left it")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, int32(2), calls.Load())
}

// testPartitionConditionalAndMessages: Messages lists a parked
// partition's head and what waits behind it, in seq order; an action made
// conditional on a state that is no longer the partition's changes
// nothing (ErrStateChanged), and on the current state it acts.
func testPartitionConditionalAndMessages(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("cond", 1, failBad(rec, &fixed), parkOptions()...))
	ids := make([]outbox.MessageID, 0, 4)
	for _, p := range []string{"a", "bad", "b", "c"} {
		id, err := ob.Enqueue(e.Ctx, e.DB, "cond", outbox.Message{Key: "k-" + p, PayloadType: "t", Payload: []byte(p),
			Headers: map[string]string{"p": p}})
		require.NoError(e.T, err)
		ids = append(ids, id)
	}
	admin := ob.Partitions()
	waitParked(e, admin, "cond", 0)
	// Parked on "bad" (seq 2); b and c may still be on their way to
	// outgoing: Messages lists only sequenced messages.
	e.Eventually("b and c sequenced behind the head", func() bool {
		return partitionStats(e, ob, "cond", 0).Unprocessed == 3
	})
	msgs, err := admin.Messages(e.Ctx, "cond", 0, 0)
	require.NoError(e.T, err)
	require.Len(e.T, msgs, 3, "the head and the two behind it; a was delivered")
	for i, m := range msgs {
		p := []string{"bad", "b", "c"}[i]
		require.Equal(e.T, int64(i+2), m.Seq)
		require.Equal(e.T, ids[i+1], m.ID)
		require.Equal(e.T, p, string(m.Payload))
		require.Equal(e.T, "k-"+p, m.Key)
		require.Equal(e.T, map[string]string{"p": p}, m.Headers)
		require.False(e.T, m.EnqueuedAt.IsZero())
	}
	two, err := admin.Messages(e.Ctx, "cond", 0, 2)
	require.NoError(e.T, err)
	require.Equal(e.T, msgs[:2], two)
	_, err = admin.Messages(e.Ctx, "cond", 5, 2)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)

	one, err := ob.Admin().PartitionStats(e.Ctx, "cond", 0)
	require.NoError(e.T, err)
	require.Equal(e.T, partitionStats(e, ob, "cond", 0), one, "one partition's stats are its row of all")
	_, err = ob.Admin().PartitionStats(e.Ctx, "cond", 1)
	require.ErrorIs(e.T, err, seqbox.ErrUnknownPartition)

	shown, err := admin.State(e.Ctx, "cond", 0)
	require.NoError(e.T, err)
	stale := shown
	stale.Attempts--
	_, err = admin.Resume(e.Ctx, "cond", 0, seqbox.IfUnchanged(stale))
	require.ErrorIs(e.T, err, seqbox.ErrStateChanged)
	require.Equal(e.T, seqbox.StateParked, mustState(e, admin, "cond", 0).State, "a refused action changes nothing")
	_, err = admin.Skip(e.Ctx, "cond", 0, nil)
	require.Error(e.T, err, "a nil option is refused")
	require.Equal(e.T, seqbox.StateParked, mustState(e, admin, "cond", 0).State)

	fixed.Store(true)
	_, err = admin.Resume(e.Ctx, "cond", 0, seqbox.IfUnchanged(shown))
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	require.Equal(e.T, ids, rec.IDs("cond", 0))
	_, err = admin.Resume(e.Ctx, "cond", 0, seqbox.IfUnchanged(shown))
	require.ErrorIs(e.T, err, seqbox.ErrStateChanged, "the second operator, who saw the same page, learns it changed")
	msgs, err = admin.Messages(e.Ctx, "cond", 0, 0)
	require.NoError(e.T, err)
	require.Empty(e.T, msgs)
}

func mustState(e *Env, admin *seqbox.Partitions, queue string, partition int) seqbox.PartitionState {
	s, err := admin.State(e.Ctx, queue, partition)
	require.NoError(e.T, err)
	return s
}
