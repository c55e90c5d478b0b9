package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
)

// requireGapFree checks a partition's delivered seqs are exactly 1..n.
func requireGapFree(e *Env, rec *Recorder, queue string, partition int) {
	e.T.Helper()
	for i, s := range rec.Seqs(queue, partition) {
		require.Equal(e.T, int64(i+1), s, "%s/%d: seq %d delivered at position %d", queue, partition, s, i)
	}
}

// testPerPartitionOrder: seqs are gap-free per partition and handlers see
// them in order; a transaction committed before another began gets the
// lower seqs; messages of one transaction keep their enqueue order.
func testPerPartitionOrder(e *Env) {
	rec := NewRecorder()
	ob := e.Start(recordingQueue(e.Builder(), "ordered", 3, rec))
	want := map[int][]outbox.MessageID{}
	var all []outbox.MessageID
	for tx := range 30 {
		msgs := make([]outbox.Message, 5)
		for i := range msgs {
			msgs[i] = outbox.Message{Partition: (tx + i) % 3, PayloadType: "o", Payload: []byte(fmt.Sprint(tx, i))}
		}
		// Commit one transaction after the other: each began after the
		// previous committed, so the order is fully determined.
		require.NoError(e.T, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
			ids, err := ob.EnqueueBatch(ctx, tx, "ordered", msgs)
			for i, id := range ids {
				want[msgs[i].Partition] = append(want[msgs[i].Partition], id)
			}
			all = append(all, ids...)
			return err
		}))
	}
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, all...))
	for p := range 3 {
		require.Equal(e.T, want[p], rec.IDs("ordered", p), "partition %d order", p)
		requireGapFree(e, rec, "ordered", p)
	}
}

// testOverlappingTransactionsNeverSkipped: transactions that commit out of
// insert-id order (a lower id committing later) are all delivered, none
// skipped, with gap-free seqs.
func testOverlappingTransactionsNeverSkipped(e *Env) {
	rec := NewRecorder()
	ob := e.Start(recordingQueue(e.Builder(), "overlap", 1, rec))
	// Hold an early transaction open while later ones commit.
	early, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	earlyID, err := ob.Enqueue(e.Ctx, early, "overlap", outbox.Message{PayloadType: "o", Payload: []byte("early")})
	require.NoError(e.T, err)
	var later []outbox.MessageID
	if e.D.Name().String() != "sqlite" { // SQLite has one writer: no overlap is possible
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 5 {
			wg.Go(func() {
				id, err := ob.Enqueue(e.Ctx, e.DB, "overlap", outbox.Message{PayloadType: "o", Payload: []byte(fmt.Sprint("later", i))})
				require.NoError(e.T, err)
				mu.Lock()
				later = append(later, id)
				mu.Unlock()
			})
		}
		wg.Wait()
		require.NoError(e.T, ob.WaitProcessed(e.Ctx, later...))
	} else {
		e.T.Log("SQLite: a single writer makes overlapping producer transactions impossible; checking the open one only")
	}
	require.NoError(e.T, early.Commit())
	ob.Flush()
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, earlyID))
	got := rec.IDs("overlap", 0)
	require.Len(e.T, got, len(later)+1)
	require.Equal(e.T, earlyID, got[len(got)-1], "the late committer is ordered as found committed: last")
	requireGapFree(e, rec, "overlap", 0)
}
