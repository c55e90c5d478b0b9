package conformance

import (
	"context"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
)

// testVacuumBoundsStorage: processed outgoing and body rows are pruned,
// unprocessed ones kept, and the vacuum counters return to zero.
func testVacuumBoundsStorage(e *Env) {
	rec := NewRecorder()
	// "kept" has no handler here: its messages are sequenced, never processed.
	ob := e.Start(recordingQueue(e.Builder(), "pruned", 4, rec).Queue("kept", 2, nil))
	pruned := make([]outbox.Message, 200)
	for i := range pruned {
		pruned[i] = outbox.Message{Partition: i % 4, PayloadType: "t", Payload: []byte("p")}
	}
	kept := []outbox.Message{{Partition: 0, PayloadType: "t"}, {Partition: 1, PayloadType: "t"}, {Partition: 1, PayloadType: "t"}}
	var ids []outbox.MessageID
	require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if ids, err = ob.EnqueueBatch(ctx, tx, "pruned", pruned); err != nil {
			return err
		}
		_, err = ob.EnqueueBatch(ctx, tx, "kept", kept)
		return err
	}))
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	e.Eventually("vacuum to prune processed rows", func() bool {
		return e.Count("outgoing") == len(kept) && e.Count("body") == len(kept)
	})
	e.Eventually("vacuum counters to return to zero", func() bool {
		var n int
		require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? WHERE counter > 0", bun.Ident(e.Prefix+"vacuum_counter")).Scan(e.Ctx, &n))
		return n == 0
	})
	require.Equal(e.T, 0, e.Count("incoming"))
	require.Equal(e.T, 200, rec.Distinct())
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	e.Eventually("vacuum counter", func() bool { return ob.Counters().Vacuumed >= 200 })
	var keptUnprocessed int64
	for _, p := range st.Partitions {
		if p.Queue == "kept" {
			keptUnprocessed += p.Unprocessed
		}
	}
	require.Equal(e.T, int64(len(kept)), keptUnprocessed)
	// A second sweep finds nothing more to do.
	n, err := ob.Sweep(e.Ctx)
	require.NoError(e.T, err)
	require.Zero(e.T, n)
}
