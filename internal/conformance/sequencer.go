package conformance

import (
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
)

// testSequenceMoveShapes: every shape a dialect uses to move a batch (small
// moves and backlog moves) numbers rows gap-free in incoming-id order,
// deletes exactly what it moved, and an empty move writes nothing.
func testSequenceMoveShapes(e *Env) {
	ob := e.Start(e.Builder().ProducerOnly().Queue("moves", 2, nil))
	msgs := make([]outbox.Message, 25)
	for i := range msgs {
		msgs[i] = outbox.Message{Partition: 1, PayloadType: "t"}
	}
	ids, err := ob.EnqueueBatch(e.Ctx, e.DB, "moves", msgs)
	require.NoError(e.T, err)
	pid := ob.PartitionIDs("moves")[1]
	var seen int64
	for i, backlog := range []bool{false, true, false, true} {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10, Backlog: backlog})
		require.NoError(e.T, err)
		want := dialect.SequenceMoveResult{PartitionID: pid} // the last move finds nothing
		if n := min(10, 25-int(seen)); n > 0 {
			want = dialect.SequenceMoveResult{PartitionID: pid, Moved: n, FirstSeq: seen + 1, LastSeq: seen + int64(n)}
		}
		require.Equal(e.T, want, res, "move %d (backlog=%v)", i, backlog)
		seen += int64(want.Moved)
	}
	require.Equal(e.T, 0, e.Count("incoming"))
	var bodies [][]byte
	require.NoError(e.T, e.DB.NewRaw("SELECT body_id FROM ? WHERE partition_id = ? ORDER BY seq", bun.Ident(e.Prefix+"outgoing"), pid).Scan(e.Ctx, &bodies))
	require.Len(e.T, bodies, len(ids))
	for i, b := range bodies {
		require.Equal(e.T, ids[i][:], b, "seq %d", i+1)
	}
	var sequence int64
	require.NoError(e.T, e.DB.NewRaw("SELECT sequence FROM ? WHERE id = ?", bun.Ident(e.Prefix+"partitions"), pid).Scan(e.Ctx, &sequence))
	require.Equal(e.T, int64(25), sequence)
}

// testLateCommitMovedAfterLaterRows: a transaction that enqueued first but
// commits after later transactions were moved — in both move shapes — is
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
	for _, backlog := range []bool{false, true, true} {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10, Backlog: backlog})
		require.NoError(e.T, err)
		moved += res.Moved
	}
	require.Equal(e.T, 15, moved, "the open transaction's row is not visible yet")
	require.NoError(e.T, early.Commit())
	for _, backlog := range []bool{false, true} {
		res, err := e.D.SequenceMove(e.Ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10, Backlog: backlog})
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
