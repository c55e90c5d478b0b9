package conformance

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/vacuum"
)

// testVacuumBoundsStorage: processed outgoing and body rows are pruned,
// unprocessed ones kept, and each partition records it is pruned up to its
// cursor, so the next sweep has nothing to read.
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
	e.Eventually("every partition pruned up to its cursor", func() bool {
		var n int
		require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? v JOIN ? p ON p.partition_id = v.partition_id WHERE p.processed_seq > v.pruned_seq",
			bun.Ident(e.Prefix+"vacuum_counter"), bun.Ident(e.Prefix+"processor")).Scan(e.Ctx, &n))
		return n == 0
	})
	require.Equal(e.T, 0, e.Count("incoming"))
	require.Equal(e.T, 200, rec.Distinct())
	st, err := ob.Stats(e.Ctx)
	require.NoError(e.T, err)
	// Rows a truncated generation took (PostgreSQL rotates every
	// TestRotateInterval) are not counted as vacuumed, and a rotation that
	// drains a generation holds the row-by-row prune: under load the
	// truncation can take some of the 200 first.
	e.Eventually("vacuum counter", func() bool {
		c := ob.Counters()
		return c.Vacuumed >= 200 || c.GenerationsTruncated > 0
	})
	require.LessOrEqual(e.T, ob.Counters().Vacuumed, int64(200), "only the processed messages are pruned")
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

// testStatsReportsBacklog: Stats shows what waits in each stage, read from
// the database: unsequenced messages in a producer-only process, then the
// sequenced-but-unacked ones, then nothing once a consumer has caught up.
func testStatsReportsBacklog(e *Env) {
	before := time.Now().Add(-time.Minute) // database and test clocks may differ a little
	producer := e.Start(e.Builder().ProducerOnly().Queue("stats", 2, nil))
	var ids []outbox.MessageID
	for i := range 5 {
		id := enqueueOne(e, producer, "stats", outbox.Message{PayloadType: "t", Partition: i % 2})
		ids = append(ids, id)
	}
	st, err := producer.Stats(e.Ctx)
	require.NoError(e.T, err)
	require.Len(e.T, st.Partitions, 2)
	for i, p := range st.Partitions {
		require.Equal(e.T, "stats", p.Queue)
		require.Equal(e.T, i, p.Partition)
		require.Equal(e.T, int64(3-i), p.Incoming, "partition %d", i)
		require.Zero(e.T, p.Unprocessed)
		require.True(e.T, p.OldestIncoming.After(before), "oldest incoming %v", p.OldestIncoming)
	}

	rec := NewRecorder()
	consumer := e.Start(recordingQueue(e.Builder(), "stats", 2, rec))
	require.NoError(e.T, consumer.WaitProcessed(e.Ctx, ids...))
	st, err = consumer.Stats(e.Ctx)
	require.NoError(e.T, err)
	for i, p := range st.Partitions {
		require.Zero(e.T, p.Incoming, "partition %d", i)
		require.Zero(e.T, p.Unprocessed, "partition %d", i)
		require.Equal(e.T, int64(3-i), p.Sequence, "partition %d", i)
		require.Equal(e.T, p.Sequence, p.ProcessedSeq, "partition %d", i)
		require.True(e.T, p.OldestIncoming.IsZero())
		require.Empty(e.T, p.DeadLetters)
	}
	// The ack commits before the process counts it: WaitProcessed can
	// return a moment before the counter moves.
	e.Eventually("5 deliveries counted", func() bool { return consumer.Counters().Delivered == 5 })
}

// testTableVacuum: where the database needs seqbox to vacuum its own tables
// (PostgreSQL with autovacuum off), the dialect does it, one process at a
// time; where autovacuum is on it leaves the work to the server. Other
// databases reclaim space by themselves and have no TableVacuumer.
func testTableVacuum(e *Env) {
	tv, ok := e.D.(vacuum.TableVacuumer)
	if !ok {
		e.T.Skipf("%s reclaims deleted rows by itself (InnoDB purge, SQLite free pages)", e.D.Name())
	}
	ob := e.Start(recordingQueue(e.Builder(), "tv", 2, NewRecorder()))
	msgs := make([]outbox.Message, 200)
	for i := range msgs {
		msgs[i] = outbox.Message{Partition: i % 2, PayloadType: "t", Payload: []byte("x")}
	}
	ids, err := ob.EnqueueBatch(e.Ctx, e.DB, "tv", msgs)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...))
	var autovacuum string
	require.NoError(e.T, e.DB.NewRaw("SELECT current_setting('autovacuum')").Scan(e.Ctx, &autovacuum))
	if autovacuum == "on" {
		res, err := tv.TableVacuum(e.Ctx, &dialect.TableVacuumParams{})
		require.NoError(e.T, err)
		require.False(e.T, res.Vacuumed, "autovacuum is on: the server's job")
		return
	}
	// The running outbox's rotator takes the same turn every round: a call
	// that finds it taken says so and vacuums nothing, and a later one gets
	// it.
	e.Eventually("a table vacuum that gets the turn", func() bool {
		res, err := tv.TableVacuum(e.Ctx, &dialect.TableVacuumParams{})
		require.NoError(e.T, err)
		if !res.Vacuumed {
			require.Equal(e.T, "another process is vacuuming", res.Reason, "autovacuum is off")
		}
		return res.Vacuumed
	})
}
