package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// testWakeupsAcrossProcesses: on a database that notifies (PostgreSQL,
// given a listener), one process's enqueues and moves are heard by the
// others' listeners with their partitions (and not by their own); and a
// consumer that polls every ten minutes delivers another process's
// messages at once, enqueued on the database handle or in a transaction
// the caller commits later. The listener here is pgdriver's; the module
// github.com/seqbox/seqbox/pglisten runs the same through its pgx and
// pgdriver adapters.
func testWakeupsAcrossProcesses(e *Env) {
	unset, ok := e.D.(dialect.WakeupListener)
	if !ok {
		e.T.Skipf("%s has no notifications: other processes' work is found by polling (PollInterval, ReconcileInterval)", e.D.Name())
	}
	require.ErrorIs(e.T, unset.ListenWakeups(e.Ctx, "listener", dialect.Wakeups{}), dialect.ErrNoListener,
		"without a listener: no wake-ups, at once")
	pd, err := postgres.New(e.DB, e.Prefix, postgres.WithListener(dbtest.PostgresListener(e.DB)))
	require.NoError(e.T, err)
	wl := pd.(dialect.WakeupListener)
	wn := pd.(dialect.WakeupNotifier)
	heard := make(chan string, 100)
	listening := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	go func() {
		_ = wl.ListenWakeups(ctx, "listener", dialect.Wakeups{
			Incoming:  func(ids []int64) { heard <- fmt.Sprint("incoming ", ids) },
			Sequenced: func(ids []int64) { heard <- fmt.Sprint("sequenced ", ids) },
			Listening: func() { listening <- struct{}{} },
		})
	}()
	<-listening
	next := func() string {
		select {
		case h := <-heard:
			return h
		case <-time.After(30 * time.Second):
			return "nothing"
		}
	}

	prod := e.Start(e.Builder().ProducerOnly().Queue("wake", 2, nil))
	pids := prod.PartitionIDs("wake")
	msg := func(part int) outbox.Message { return outbox.Message{Partition: part, PayloadType: "t"} }
	_, err = prod.Enqueue(e.Ctx, e.DB, "wake", msg(1))
	require.NoError(e.T, err)
	require.Equal(e.T, fmt.Sprint("incoming ", []int64{pids[1]}), next(), "a producer-only process's commit is heard")
	require.NoError(e.T, wn.NotifyWakeups(e.Ctx, "listener", nil, []int64{pids[0]}))
	require.NoError(e.T, wn.NotifyWakeups(e.Ctx, "other", nil, []int64{pids[0]}))
	require.Equal(e.T, fmt.Sprint("sequenced ", []int64{pids[0]}), next(), "a process does not hear itself")
	many := make([]int64, 2000)
	for i := range many {
		many[i] = int64(1_000_000 + i)
	}
	require.NoError(e.T, wn.NotifyWakeups(e.Ctx, "other", many, nil))
	require.Equal(e.T, "incoming []", next(), "too many ids for one notification: all partitions")

	// A listener whose connection is killed listens again, and says so (the
	// outbox then scans for what it missed).
	_, err = e.DB.NewRaw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = ?",
		`LISTEN "`+e.Prefix+`outgoing"`).Exec(e.Ctx)
	require.NoError(e.T, err)
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		e.T.Fatal("the listener did not listen again after its connection was killed")
	}
	require.NoError(e.T, wn.NotifyWakeups(e.Ctx, "other", []int64{pids[0]}, nil))
	require.Equal(e.T, fmt.Sprint("incoming ", []int64{pids[0]}), next(), "heard again after the reconnect")

	delivered := make(chan outbox.MessageID, 10)
	cons := e.Start(e.Builder().PollInterval(10*time.Minute).ReconcileInterval(10*time.Minute).
		Queue("wake", 2, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			delivered <- d.ID
			return nil
		})))
	select { // the message enqueued above: found by the consumer's start-up scan
	case <-delivered:
	case <-time.After(30 * time.Second):
		e.T.Fatal("the waiting message was not delivered at start-up")
	}
	wait, cancelWait := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancelWait()
	id, err := prod.Enqueue(e.Ctx, e.DB, "wake", msg(0))
	require.NoError(e.T, err)
	require.NoError(e.T, cons.WaitProcessed(wait, id), "woken by the producer's commit, not by a ten-minute poll")

	tx, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	late, err := prod.Enqueue(e.Ctx, tx, "wake", msg(1))
	require.NoError(e.T, err)
	time.Sleep(100 * time.Millisecond) // the caller commits a little later
	require.NoError(e.T, tx.Commit())
	require.NoError(e.T, cons.WaitProcessed(wait, late), "a caller-owned transaction: the listener keeps probing")
}
