package conformance

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// testSequenceMoveBatches: moves of a partition in full and partial batches
// number rows gap-free in incoming-id order, delete exactly what they moved,
// and an empty move writes nothing.
func testSequenceMoveBatches(e *Env) {
	ob := e.Start(e.Builder().ProducerOnly().Queue("moves", 2, nil))
	msgs := make([]outbox.Message, 25)
	for i := range msgs {
		msgs[i] = outbox.Message{Partition: 1, PayloadType: "t"}
	}
	ids, err := ob.EnqueueBatch(e.Ctx, e.DB, "moves", msgs)
	require.NoError(e.T, err)
	pid := ob.PartitionIDs("moves")[1]
	var seen int64
	for i := range 4 {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
		require.NoError(e.T, err)
		want := dialect.SequenceMoveResult{PartitionID: pid} // the last move finds nothing
		if n := min(10, 25-int(seen)); n > 0 {
			want = dialect.SequenceMoveResult{PartitionID: pid, Moved: n, FirstSeq: seen + 1, LastSeq: seen + int64(n)}
		}
		require.Equal(e.T, want, res, "move %d", i)
		seen += int64(want.Moved)
	}
	require.Equal(e.T, 0, e.Count("incoming"))
	var bodies [][]byte
	require.NoError(e.T, e.DB.NewRaw("SELECT body_id FROM ? WHERE partition_id = ? ORDER BY seq", bun.Ident(e.Prefix+"outgoing"), pid).Scan(e.Ctx, &bodies))
	require.Len(e.T, bodies, len(ids))
	for i, b := range bodies {
		require.Equal(e.T, ids[i][:], b, "seq %d", i+1)
	}
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	require.Equal(e.T, int64(25), st.Partitions[1].Sequence)
}

// testLateCommitMovedAfterLaterRows: a transaction that enqueued first but
// commits after later transactions were moved is
// still moved when it commits: the order a dialect reads in (and any lower
// bound it keeps, as PostgreSQL does) never passes an open transaction.
func testLateCommitMovedAfterLaterRows(e *Env) {
	if e.D.Features().Has(dialect.SingleWriter) {
		e.T.Skip("one writer: an open write transaction blocks every other enqueue")
	}
	ob := e.Start(e.Builder().ProducerOnly().Queue("late", 1, nil))
	pid := ob.PartitionIDs("late")[0]
	early, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	defer func() { _ = early.Rollback() }()
	lateID, err := ob.Enqueue(e.Ctx, early, "late", outbox.Message{PayloadType: "t", Payload: []byte("early")})
	require.NoError(e.T, err)
	for range 15 {
		_, err := ob.Enqueue(e.Ctx, e.DB, "late", outbox.Message{PayloadType: "t"})
		require.NoError(e.T, err)
	}
	moved := 0
	for range 3 {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
		require.NoError(e.T, err)
		moved += res.Moved
	}
	require.Equal(e.T, 15, moved, "the open transaction's row is not visible yet")
	require.NoError(e.T, early.Commit())
	for range 2 {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
		require.NoError(e.T, err)
		moved += res.Moved
	}
	require.Equal(e.T, 16, moved, "the late commit was passed over")
	var body []byte
	require.NoError(e.T, e.DB.NewRaw("SELECT body_id FROM ? WHERE partition_id = ? AND seq = 16", bun.Ident(e.Prefix+"outgoing"), pid).Scan(e.Ctx, &body))
	require.Equal(e.T, lateID[:], body)
}

// testSequenceMoveMany: a move of several partitions in one transaction
// numbers each partition's rows gap-free in enqueue order, moves at most the
// limit from each, reports each partition, and skips a partition another
// sequencer holds (on databases shared by several processes).
func testSequenceMoveMany(e *Env) {
	ob := e.Start(e.Builder().ProducerOnly().Queue("many", 4, nil))
	pids := ob.PartitionIDs("many")
	counts := []int{3, 12, 0, 5}
	want := map[int][]outbox.MessageID{}
	for part, n := range counts {
		for range n {
			id, err := ob.Enqueue(e.Ctx, e.DB, "many", outbox.Message{Partition: part, PayloadType: "t"})
			require.NoError(e.T, err)
			want[part] = append(want[part], id)
		}
	}
	res, err := e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
	require.NoError(e.T, err)
	require.Equal(e.T, []dialect.SequenceMoveResult{
		{PartitionID: pids[0], Moved: 3, FirstSeq: 1, LastSeq: 3},
		{PartitionID: pids[1], Moved: 10, FirstSeq: 1, LastSeq: 10},
		{PartitionID: pids[2]},
		{PartitionID: pids[3], Moved: 5, FirstSeq: 1, LastSeq: 5},
	}, res)
	res, err = e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
	require.NoError(e.T, err)
	require.Equal(e.T, dialect.SequenceMoveResult{PartitionID: pids[1], Moved: 2, FirstSeq: 11, LastSeq: 12}, res[1])
	require.Equal(e.T, 0, e.Count("incoming"))
	for part, pid := range pids {
		var bodies [][]byte
		require.NoError(e.T, e.DB.NewRaw("SELECT body_id FROM ? WHERE partition_id = ? ORDER BY seq", bun.Ident(e.Prefix+"outgoing"), pid).Scan(e.Ctx, &bodies))
		require.Len(e.T, bodies, counts[part])
		for i, b := range bodies {
			require.Equal(e.T, want[part][i][:], b, "partition %d seq %d", part, i+1)
		}
	}

	if !e.D.Features().Has(dialect.MultiProcess) {
		return // one process: no other sequencer can hold a partition
	}
	_, err = ob.Enqueue(e.Ctx, e.DB, "many", outbox.Message{Partition: 0, PayloadType: "t"})
	require.NoError(e.T, err)
	other, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.NewRaw("SELECT id FROM ? WHERE id = ? FOR UPDATE", bun.Ident(e.Prefix+"partitions"), pids[0]).Exec(e.Ctx)
	require.NoError(e.T, err)
	res, err = e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
	require.NoError(e.T, err)
	require.True(e.T, res[0].Skipped, "a partition another transaction holds is skipped, not waited for")
	require.False(e.T, res[1].Skipped)
}

// testSeqsContinueAfterPrune: no row keeps a partition's last seq handed
// out; it is the top of its outgoing rows, or its cursor once the vacuum
// has pruned every one. However the partition's outgoing rows were
// emptied — delivered, rejected to a dead letter, skipped by an operator,
// purged to a tombstone and passed over — the next messages continue the
// seqs gap-free from there, replays included: a sequencer that numbered
// from the rows it can see would start again at 1, behind the cursor, and
// those messages would never be delivered.
func testSeqsContinueAfterPrune(e *Env) {
	const queue = "again"
	rec := NewRecorder()
	var fixed atomic.Bool
	ob := e.Start(e.Builder().Queue(queue, 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		switch p := string(d.Payload); {
		case strings.HasPrefix(p, "reject") && !fixed.Load():
			return processor.Reject(errors.New("rejected " + p))
		case strings.HasPrefix(p, "bad") && !fixed.Load():
			return errors.New("cannot handle " + p) // MaxAttempts 1: parks
		}
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	}), processor.OnFailure(processor.Park), processor.MaxAttempts(1)))
	admin := ob.Partitions()
	// pruned waits until the vacuum has deleted every outgoing row and
	// checks that the last seq handed out is still the cursor.
	pruned := func(seq int64) {
		e.T.Helper()
		e.Eventually("outgoing pruned whole", func() bool {
			_, err := ob.Sweep(e.Ctx)
			require.NoError(e.T, err)
			return e.Count("outgoing") == 0
		})
		st := partitionStats(e, ob, queue, 0)
		require.Equal(e.T, seq, st.ProcessedSeq)
		require.Equal(e.T, seq, st.Sequence, "the last seq handed out outlives its rows")
		require.Zero(e.T, st.Unprocessed)
	}
	seqOf := func(id outbox.MessageID) int64 {
		ids, seqs := rec.IDs(queue, 0), rec.Seqs(queue, 0)
		for i := range ids {
			if ids[i] == id {
				return seqs[i]
			}
		}
		e.T.Fatalf("message %v not delivered", id)
		return 0
	}

	// Delivered and rejected.
	first := enqueueAll(e, ob, queue, 0, "a", "reject1", "b")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, first...))
	pruned(3)
	c := enqueueAll(e, ob, queue, 0, "c")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, c...))
	require.Equal(e.T, int64(4), seqOf(c[0]))
	pruned(4)

	// Skipped by an operator.
	bad1 := enqueueAll(e, ob, queue, 0, "bad1")
	waitParked(e, admin, queue, 0)
	skipped, err := admin.Skip(e.Ctx, queue, 0)
	require.NoError(e.T, err)
	require.Equal(e.T, bad1[0], skipped.MessageID)
	pruned(5)
	d := enqueueAll(e, ob, queue, 0, "d")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, d...))
	require.Equal(e.T, int64(6), seqOf(d[0]))
	pruned(6)

	// Purged to a tombstone behind a parked head, then passed over.
	enqueueAll(e, ob, queue, 0, "bad2")
	waitParked(e, admin, queue, 0)
	purgeMe, err := ob.Enqueue(e.Ctx, e.DB, queue, outbox.Message{PayloadType: "t", Payload: []byte("p"), Headers: map[string]string{"purge": "yes"}})
	require.NoError(e.T, err)
	e.Eventually("the message to purge sequenced", func() bool { return partitionStats(e, ob, queue, 0).Incoming == 0 })
	res, err := ob.Purge(e.Ctx, queue, outbox.PurgeFilter{Headers: map[string]string{"purge": "yes"}})
	require.NoError(e.T, err)
	require.Equal(e.T, 1, res.Outgoing)
	_, err = admin.Skip(e.Ctx, queue, 0)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, purgeMe))
	pruned(8)
	last := enqueueAll(e, ob, queue, 0, "e")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, last...))
	require.Equal(e.T, int64(9), seqOf(last[0]))
	pruned(9)

	// Replayed dead letters are new messages at the tail.
	fixed.Store(true)
	replayed, err := ob.DeadLetters().Replay(e.Ctx, deadletter.Matching(deadletter.Filter{Queue: queue}))
	require.NoError(e.T, err)
	require.Len(e.T, replayed.ReplayIDs, 3)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, replayed.ReplayIDs...))
	pruned(12)
	last = enqueueAll(e, ob, queue, 0, "f")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, last...))

	require.Equal(e.T, []int64{1, 3, 4, 6, 9, 10, 11, 12, 13}, rec.Seqs(queue, 0), "delivered seqs: the rest went to dead letters or were purged")
	var letters []int64
	for _, l := range e.deadLetters() {
		letters = append(letters, l.Seq)
	}
	require.Equal(e.T, []int64{2, 5, 7}, letters)
}
