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

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// rejectBad is a leased handler that rejects payloads starting with "bad"
// until fixed is set, recording what it delivers.
func rejectBad(rec *Recorder, fixed *atomic.Bool, replayOf *sync.Map) processor.Handler {
	return processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if strings.HasPrefix(string(d.Payload), "bad") && !fixed.Load() {
			return processor.Reject(errors.New("cannot handle " + string(d.Payload)))
		}
		if of, ok := d.Headers[deadletter.ReplayOfHeader]; ok && replayOf != nil {
			replayOf.Store(d.ID, of)
		}
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	})
}

// enqueueEach enqueues one message per payload into a partition, each in
// its own transaction, and waits until every one is processed.
func enqueueEach(e *Env, ob *Outbox, queue string, partition int, payloadType string, payloads ...string) []outbox.MessageID {
	var ids []outbox.MessageID
	for _, p := range payloads {
		id, err := ob.Enqueue(e.Ctx, e.DB, queue, outbox.Message{Partition: partition, PayloadType: payloadType, Payload: []byte(p),
			Headers: map[string]string{"origin": p}})
		require.NoError(e.T, err)
		ids = append(ids, id)
	}
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	return ids
}

// testDeadLetterReplayInOrder: messages a buggy handler rejected are dead
// letters; once the bug is fixed a bulk replay delivers each exactly once,
// after everything already in its partition and in their original order,
// with a header naming the original, and the letters end resolved.
func testDeadLetterReplayInOrder(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	var replayOf sync.Map
	ob := e.Start(e.Builder().Queue("dlq", 2, rejectBad(rec, &fixed, &replayOf)))
	p0 := enqueueEach(e, ob, "dlq", 0, "t", "a", "bad1", "b", "bad2", "c")
	p1 := enqueueEach(e, ob, "dlq", 1, "t", "bad3", "d")
	later := enqueueEach(e, ob, "dlq", 0, "t", "e")
	dl := ob.DeadLetters()
	counts, err := dl.Count(e.Ctx, deadletter.Filter{Queue: "dlq"})
	require.NoError(e.T, err)
	require.Equal(e.T, map[deadletter.Status]int64{deadletter.StatusPending: 3}, counts)

	fixed.Store(true)
	changed, err := dl.Replay(e.Ctx, deadletter.Matching(deadletter.Filter{Queue: "dlq"}))
	require.NoError(e.T, err)
	require.Len(e.T, changed.IDs, 3)
	require.Len(e.T, changed.ReplayIDs, 3)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, changed.ReplayIDs...))

	// Partition 0: what was there first, then the replays in their order.
	got := rec.IDs("dlq", 0)
	require.Len(e.T, got, 6)
	require.Equal(e.T, []outbox.MessageID{p0[0], p0[2], p0[4], later[0]}, got[:4])
	originals := map[outbox.MessageID]string{}
	replayOf.Range(func(k, v any) bool { originals[k.(outbox.MessageID)] = v.(string); return true })
	require.Equal(e.T, p0[1].String(), originals[got[4]], "first replay is bad1's")
	require.Equal(e.T, p0[3].String(), originals[got[5]], "then bad2's")
	got1 := rec.IDs("dlq", 1)
	require.Equal(e.T, p1[1], got1[0])
	require.Equal(e.T, p1[0].String(), originals[got1[1]])
	for _, id := range changed.ReplayIDs {
		require.Equal(e.T, 1, rec.Times(id), "each replay delivered once")
	}
	e.Eventually("replayed letters resolved", func() bool {
		c, err := dl.Count(e.Ctx, deadletter.Filter{Queue: "dlq"})
		return err == nil && c[deadletter.StatusResolved] == 3 && len(c) == 1
	})
	letter, err := dl.Get(e.Ctx, p0[1])
	require.NoError(e.T, err)
	require.Equal(e.T, deadletter.StatusResolved, letter.Status)
	require.NotNil(e.T, letter.ReplayID)
	require.NotNil(e.T, letter.CompletedAt)
	require.Equal(e.T, map[string]string{"origin": "bad1"}, letter.Headers)
}

// testDeadLetterActions: list, count and get with every filter; resolve,
// discard and purge by ids or filter; and the typed errors that change
// nothing: unknown ids, a letter no longer pending, a filter matching
// nothing, a selection that is not one.
func testDeadLetterActions(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("ops", 2, rejectBad(rec, &fixed, nil)))
	before := time.Now().Add(-time.Minute)
	a := enqueueEach(e, ob, "ops", 0, "t.a", "bad-a1", "ok", "bad-a2")
	b := enqueueEach(e, ob, "ops", 1, "t.b", "bad-b1", "bad-b2")
	dl := ob.DeadLetters()
	ctx := e.Ctx

	count := func(f deadletter.Filter) map[deadletter.Status]int64 {
		c, err := dl.Count(ctx, f)
		require.NoError(e.T, err)
		return c
	}
	pending := deadletter.StatusPending
	require.Equal(e.T, int64(4), count(deadletter.Filter{})[pending])
	require.Equal(e.T, int64(2), count(deadletter.Filter{PayloadType: "t.a"})[pending])
	require.Equal(e.T, int64(2), count(deadletter.Filter{Queue: "ops", Partitions: []int{1}})[pending])
	require.Empty(e.T, count(deadletter.Filter{Queue: "no-such-queue"}))
	require.Empty(e.T, count(deadletter.Filter{FailedTo: before}))
	require.Equal(e.T, int64(4), count(deadletter.Filter{FailedFrom: before, FailedTo: time.Now().Add(time.Hour)})[pending])

	// Keyset pages.
	page, err := dl.List(ctx, deadletter.Filter{Queue: "ops"}, 0, 3)
	require.NoError(e.T, err)
	require.Len(e.T, page.Letters, 3)
	require.NotZero(e.T, page.Next)
	rest, err := dl.List(ctx, deadletter.Filter{Queue: "ops"}, page.Next, 3)
	require.NoError(e.T, err)
	require.Len(e.T, rest.Letters, 1)
	require.Zero(e.T, rest.Next)
	require.Greater(e.T, rest.Letters[0].ID, page.Letters[2].ID)

	first, err := dl.Get(ctx, a[0])
	require.NoError(e.T, err)
	require.Equal(e.T, "ops", first.Queue)
	require.Equal(e.T, 0, first.Partition)
	require.Equal(e.T, int64(1), first.Seq)
	require.Equal(e.T, "t.a", first.PayloadType)
	require.Equal(e.T, []byte("bad-a1"), first.Payload)
	require.Equal(e.T, map[string]string{"origin": "bad-a1"}, first.Headers)
	require.Equal(e.T, 1, first.Attempts)
	require.Contains(e.T, first.LastError, "cannot handle bad-a1")
	require.Equal(e.T, pending, first.Status)
	_, err = dl.Get(ctx, a[1])
	require.ErrorIs(e.T, err, deadletter.ErrNotFound, "an acked message is no dead letter")

	ids := map[outbox.MessageID]int64{}
	for _, l := range append(page.Letters, rest.Letters...) {
		ids[l.MessageID] = l.ID
	}

	// Resolve by hand, then every action on it again is refused.
	changed, err := dl.Resolve(ctx, deadletter.IDs(ids[a[0]]), "fixed in the ledger by hand")
	require.NoError(e.T, err)
	require.Equal(e.T, []int64{ids[a[0]]}, changed.IDs)
	resolved, err := dl.Get(ctx, a[0])
	require.NoError(e.T, err)
	require.Equal(e.T, deadletter.StatusResolved, resolved.Status)
	require.Equal(e.T, "fixed in the ledger by hand", resolved.Note)
	require.NotNil(e.T, resolved.CompletedAt)
	for _, act := range []func() (deadletter.Changed, error){
		func() (deadletter.Changed, error) { return dl.Resolve(ctx, deadletter.IDs(ids[a[0]]), "") },
		func() (deadletter.Changed, error) { return dl.Discard(ctx, deadletter.IDs(ids[a[0]]), "") },
		func() (deadletter.Changed, error) { return dl.Replay(ctx, deadletter.IDs(ids[a[0]])) },
	} {
		_, err := act()
		require.ErrorIs(e.T, err, deadletter.ErrWrongStatus)
		var se *deadletter.StatusError
		require.ErrorAs(e.T, err, &se)
		require.Equal(e.T, ids[a[0]], se.ID)
		require.Equal(e.T, deadletter.StatusResolved, se.Status)
	}

	// An unknown id among good ones: nothing changes.
	_, err = dl.Discard(ctx, deadletter.IDs(ids[a[2]], 1<<40), "nope")
	require.ErrorIs(e.T, err, deadletter.ErrNotFound)
	require.Equal(e.T, int64(3), count(deadletter.Filter{})[pending])

	// Bulk by filter; again, and it matches nothing.
	changed, err = dl.Discard(ctx, deadletter.Matching(deadletter.Filter{PayloadType: "t.b"}), "obsolete")
	require.NoError(e.T, err)
	require.Equal(e.T, []int64{ids[b[0]], ids[b[1]]}, changed.IDs)
	_, err = dl.Discard(ctx, deadletter.Matching(deadletter.Filter{PayloadType: "t.b"}), "obsolete")
	require.ErrorIs(e.T, err, deadletter.ErrNoMatch)
	_, err = dl.Replay(ctx, deadletter.Matching(deadletter.Filter{Queue: "no-such-queue"}))
	require.ErrorIs(e.T, err, deadletter.ErrNoMatch)

	for _, sel := range []deadletter.Selection{{}, {IDs: []int64{1}, Filter: &deadletter.Filter{}}, deadletter.IDs()} {
		_, err = dl.Resolve(ctx, sel, "")
		require.ErrorIs(e.T, err, deadletter.ErrInvalidSelection)
	}
	_, err = dl.Resolve(ctx, deadletter.Matching(deadletter.Filter{Partitions: []int{0}}), "")
	require.ErrorIs(e.T, err, deadletter.ErrInvalidSelection, "partitions without a queue")
	_, err = dl.Purge(ctx, deadletter.Filter{Statuses: []deadletter.Status{pending}}, time.Now())
	require.ErrorIs(e.T, err, deadletter.ErrInvalidSelection, "purge never deletes pending letters")

	// Purge: a cutoff before they were finished matches nothing; after, it
	// deletes the resolved and discarded ones only.
	_, err = dl.Purge(ctx, deadletter.Filter{}, before)
	require.ErrorIs(e.T, err, deadletter.ErrNoMatch)
	purged, err := dl.Purge(ctx, deadletter.Filter{}, time.Now().Add(time.Hour))
	require.NoError(e.T, err)
	require.Len(e.T, purged.IDs, 3)
	require.Equal(e.T, map[deadletter.Status]int64{pending: 1}, count(deadletter.Filter{}))
}

// testDeadLetterOperatorsRace: two operators acting on the same letters at
// once: for each letter exactly one wins, the other gets ErrWrongStatus.
func testDeadLetterOperatorsRace(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("race", 1, rejectBad(rec, &fixed, nil)))
	msgs := enqueueEach(e, ob, "race", 0, "t", "bad1", "bad2", "bad3", "bad4", "bad5")
	dl := ob.DeadLetters()
	for _, m := range msgs {
		l, err := dl.Get(e.Ctx, m)
		require.NoError(e.T, err)
		errs := make(chan error, 3)
		var wg sync.WaitGroup
		for _, act := range []func() error{
			func() error { _, err := dl.Resolve(e.Ctx, deadletter.IDs(l.ID), "operator one"); return err },
			func() error { _, err := dl.Discard(e.Ctx, deadletter.IDs(l.ID), "operator two"); return err },
			func() error { _, err := dl.Replay(e.Ctx, deadletter.IDs(l.ID)); return err },
		} {
			wg.Go(func() { errs <- act() })
		}
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			if err == nil {
				wins++
				continue
			}
			require.ErrorIs(e.T, err, deadletter.ErrWrongStatus)
		}
		require.Equal(e.T, 1, wins, "exactly one operator wins")
	}
}

// testDeadLetterIDs: the operations that write dead letters set each
// letter's row id, the id the dead-letter admin and `seqbox dlq` know it
// by (the processor logs it), whether in a transaction of their own or in
// the caller's.
func testDeadLetterIDs(e *Env) {
	ob := e.Start(e.Builder().ProducerOnly().Queue("dlid", 1, nil))
	pid := ob.PartitionIDs("dlid")[0]
	letter := func(seq int64) dialect.DeadLetter {
		ids := make([][16]byte, 1)
		require.NoError(e.T, uuidv7.Fill(ids, time.Now()))
		return dialect.DeadLetter{PartitionID: pid, Seq: seq, MessageID: ids[0], PayloadType: "t", Payload: []byte("x"),
			CreatedAt: time.Now(), LastError: "boom", Attempts: 1}
	}
	rowID := func(d dialect.DeadLetter) int64 {
		var id int64
		require.NoError(e.T, e.DB.NewRaw("SELECT id FROM ? WHERE message_id = ?", bun.Ident(e.Prefix+"dead_letters"), d.MessageID[:]).Scan(e.Ctx, &id))
		return id
	}
	var all []int64
	check := func(what string, dls []dialect.DeadLetter) {
		e.T.Helper()
		for _, d := range dls {
			require.Equal(e.T, rowID(d), d.ID, "%s: the letter of seq %d", what, d.Seq)
			all = append(all, d.ID)
		}
	}

	// A leased-mode ack: a transaction of its own.
	acked := []dialect.DeadLetter{letter(1), letter(2)}
	require.NoError(e.T, e.D.ProcessorAck(e.Ctx, dialect.ProcessorAdvance(pid, "", 2, acked)))
	check("ack", acked)
	// A transactional-mode update, in the caller's transaction. Seq 2 has a
	// letter already (never twice in practice): the new row's id counts.
	updated := []dialect.DeadLetter{letter(2), letter(3)}
	require.NoError(e.T, e.D.RunInTx(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		u := dialect.ProcessorAdvance(pid, "", 3, updated)
		u.Conn = tx
		return e.D.ProcessorUpdate(ctx, u)
	}))
	check("update", updated)

	page, err := ob.DeadLetters().List(e.Ctx, deadletter.Filter{Queue: "dlid"}, 0, 100)
	require.NoError(e.T, err)
	var listed []int64
	for _, l := range page.Letters {
		listed = append(listed, l.ID)
	}
	require.ElementsMatch(e.T, all, listed, "the admin lists the letters by the ids returned")
}

// testDeadLetterBulkConditional: a bulk action by a filter on error text
// and headers, bounded by the highest id a tally counted and conditional
// on its count, acts on exactly what was counted: not on a letter that
// arrived after the count, and not at all when the count changed.
func testDeadLetterBulkConditional(e *Env) {
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue("bulk", 2, rejectBad(rec, &fixed, nil)))
	enqueueEach(e, ob, "bulk", 0, "t", "bad<1>", "ok", "bad<2>")
	enqueueEach(e, ob, "bulk", 1, "t", "bad<3>", "other")
	dl := ob.DeadLetters()
	f := deadletter.Filter{Queue: "bulk", ErrorContains: "handle bad<", Headers: map[string]string{"origin": "bad<1>"}}
	t1, err := dl.Tally(e.Ctx, f)
	require.NoError(e.T, err)
	require.Equal(e.T, int64(1), t1.Total, "one letter has that error and header")
	f.Headers = nil
	tally, err := dl.Tally(e.Ctx, f)
	require.NoError(e.T, err)
	require.Equal(e.T, map[deadletter.Status]int64{deadletter.StatusPending: 3}, tally.ByStatus)
	require.Equal(e.T, int64(3), tally.Total)
	none, err := dl.Tally(e.Ctx, deadletter.Filter{ErrorContains: "HANDLE"})
	require.NoError(e.T, err)
	require.Zero(e.T, none.Total, "error text matches case-sensitively")
	require.Zero(e.T, none.MaxID)

	// Counted: 3. Another letter arrives before the operator confirms.
	enqueueEach(e, ob, "bulk", 1, "t", "bad<4>")
	f.MaxID = tally.MaxID
	sel := deadletter.Matching(f).Expecting(int(tally.Total))
	_, err = dl.Resolve(e.Ctx, deadletter.Matching(f).Expecting(2), "stale count")
	var ce *deadletter.CountError
	require.ErrorAs(e.T, err, &ce)
	require.ErrorIs(e.T, err, deadletter.ErrCountChanged)
	require.Equal(e.T, 2, ce.Expected)
	require.Equal(e.T, 3, ce.Found)

	fixed.Store(true)
	changed, err := dl.Replay(e.Ctx, sel)
	require.NoError(e.T, err)
	require.Len(e.T, changed.IDs, 3, "the letter that arrived after the count is not replayed")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, changed.ReplayIDs...))
	_, err = dl.Replay(e.Ctx, sel)
	require.ErrorIs(e.T, err, deadletter.ErrCountChanged, "the second operator confirming the same count changes nothing")
	after, err := dl.Count(e.Ctx, deadletter.Filter{Queue: "bulk", Statuses: []deadletter.Status{deadletter.StatusPending}})
	require.NoError(e.T, err)
	require.Equal(e.T, map[deadletter.Status]int64{deadletter.StatusPending: 1}, after, "bad<4> is still pending")

	for _, bad := range []deadletter.Filter{
		{ErrorContains: "nul\x00"}, {ErrorContains: "\xff"}, {Headers: map[string]string{"": "v"}},
		{Headers: map[string]string{"k": "v\x00"}}, {MaxID: -1}, {Partitions: []int{0}},
		{Statuses: []deadletter.Status{"gone"}}, {FailedFrom: time.Unix(10, 0), FailedTo: time.Unix(5, 0)},
	} {
		_, err := dl.Count(e.Ctx, bad)
		require.ErrorIs(e.T, err, deadletter.ErrInvalidSelection, "%+v", bad)
		_, err = dl.Discard(e.Ctx, deadletter.Matching(bad), "x")
		require.ErrorIs(e.T, err, deadletter.ErrInvalidSelection, "%+v", bad)
	}
}
