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
		want := dialect.SequenceMoveResult{} // the last move finds nothing
		if n := min(10, 25-int(seen)); n > 0 {
			want = dialect.SequenceMoveResult{Moved: n, FirstSeq: seen + 1, LastSeq: seen + int64(n)}
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
