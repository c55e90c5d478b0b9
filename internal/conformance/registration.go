package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/relaytest"
	"github.com/seqbox/seqbox/outbox"
)

// testRegistrationIdempotent: starting twice with the same queues reuses
// the same rows; processor and vacuum rows exist per partition.
func testRegistrationIdempotent(e *Env) {
	a := e.Start(e.Builder().Queue("orders", 4, nil).Queue("audit", 1, nil))
	counts := e.Counts()
	require.Equal(e.T, 5, counts["partitions"])
	require.Equal(e.T, 5, counts["processor"])
	require.Equal(e.T, 5, counts["vacuum_counter"])
	b := e.Start(e.Builder().Queue("orders", 4, nil).Queue("audit", 1, nil))
	require.Equal(e.T, a.PartitionIDs("orders"), b.PartitionIDs("orders"))
	require.Equal(e.T, a.PartitionIDs("audit"), b.PartitionIDs("audit"))
	require.Equal(e.T, counts, e.Counts())
}

// testRegistrationConcurrent: instances registering the same queue at the
// same moment agree on its partitions; a concurrent different count loses.
func testRegistrationConcurrent(e *Env) {
	const n = 6
	results := make([][]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = registerOne(e, "race", 8)
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(e.T, errs[i])
		require.Len(e.T, results[i], 8)
		require.Equal(e.T, results[0], results[i])
	}
	require.Equal(e.T, 8, e.Count("partitions"))
	require.Equal(e.T, 8, e.Count("processor"))

	// Two counts racing for a new queue: exactly one wins, the other gets
	// the typed mismatch, and the rows match the winner.
	var mu sync.Mutex
	won := map[int]bool{}
	for _, parts := range []int{3, 5, 3, 5} {
		wg.Go(func() {
			ids, err := registerOne(e, "split", parts)
			if err != nil {
				require.ErrorIs(e.T, err, dialect.ErrPartitionCountMismatch)
				return
			}
			mu.Lock()
			won[len(ids)] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(e.T, won, 1, "both counts registered: %v", won)
	var winner int
	for k := range won {
		winner = k
	}
	require.Equal(e.T, 8+winner, e.Count("partitions"))
}

func registerOne(e *Env, queue string, partitions int) ([]int64, error) {
	ids, err := e.D.QueueRegister(e.Ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: queue, Partitions: partitions}}})
	if err != nil {
		return nil, err
	}
	return ids[0], nil
}

// testFailedStartRegistersNothing: a Start that fails on one queue's
// partition-count mismatch leaves none of its other queues registered, so
// a later Start with corrected counts succeeds.
func testFailedStartRegistersNothing(e *Env) {
	e.Start(e.Builder().Queue("b", 8, nil))
	before := e.Counts()
	_, err := e.Builder().Queue("a", 3, nil).Queue("b", 4, nil).Queue("c", 2, nil).Start(e.Ctx)
	require.ErrorIs(e.T, err, dialect.ErrPartitionCountMismatch)
	require.Equal(e.T, before, e.Counts(), "the failed Start left rows behind")
	e.Start(e.Builder().Queue("a", 5, nil).Queue("b", 8, nil))
	require.Equal(e.T, 13, e.Count("partitions"))
}

// testStartWithoutSchema: Start without Migrate on tables that do not
// exist says what to do (ErrSchemaMissing, naming the fixes) instead of
// passing on the driver's "no such table", and creates nothing.
func testStartWithoutSchema(e *Env) {
	prefix := dbtest.Prefix(e.T) // a prefix of its own: the env's is migrated
	d, err := dialects.Open(context.Background(), e.DB, prefix)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{}) })

	_, err = seqbox.New(e.DB).TablePrefix(prefix).Logger(e.Logger()).Queue("orders", 4, nil).Start(e.Ctx)
	require.ErrorIs(e.T, err, outbox.ErrSchemaMissing)
	for _, fix := range []string{"seqbox migrate --dsn", "--prefix " + prefix, "Migrate(true)", "seqbox.Migrations"} {
		require.Contains(e.T, err.Error(), fix)
	}
	st, err := d.SchemaStatus(e.Ctx, &dialect.SchemaStatusParams{})
	require.NoError(e.T, err)
	require.Zero(e.T, st.Current, "the failed Start created tables")

	// The fix it names works.
	require.NoError(e.T, d.SchemaMigrate(e.Ctx, &dialect.SchemaMigrateParams{}))
	ob, err := seqbox.New(e.DB).TablePrefix(prefix).Logger(e.Logger()).Queue("orders", 4, nil).Start(e.Ctx)
	require.NoError(e.T, err)
	require.NoError(e.T, ob.Stop(e.Ctx))
}

// testStartWaitsForDatabase: Start retries transient errors until its
// context ends ("The SQL layer"), its first contact with the server
// included, so a process started while the database is down or restarting
// waits for it. A proxy refuses connections until Start has been refused
// once, then lets them through.
func testStartWaitsForDatabase(e *Env) {
	target, openAt, ok := dbtest.Server(e.T, e.D.Name())
	if !ok {
		e.T.Skipf("%s is not reached over TCP: no server to wait for", e.D.Name())
	}
	proxy := relaytest.NewProxy(e.T, target)
	proxy.Down()
	db := openAt(proxy.Addr())
	before := proxy.Refused() // bun's MySQL dialect tries once when opened
	type started struct {
		ob  *Outbox
		err error
	}
	done := make(chan started, 1)
	go func() {
		ob, err := StartOutbox(e.Ctx, seqbox.New(db).TablePrefix(e.Prefix).Migrate(true).Logger(e.Logger()).Queue("wait", 2, nil))
		done <- started{ob, err}
	}()
	e.Eventually("Start to be refused", func() bool { return proxy.Refused() > before })
	proxy.Up()
	r := <-done
	require.NoError(e.T, r.err, "Start gave up while the database was unreachable")
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.ob.Stop(ctx)
	})
	require.Len(e.T, r.ob.PartitionIDs("wait"), 2)
}

// testRegistrationMaxPartitions: a queue of outbox.MaxPartitions
// partitions registers in one Start (its rows in chunks every database
// takes), enqueues to its last partition and reads its stats; one more
// partition is a configuration error that registers nothing.
func testRegistrationMaxPartitions(e *Env) {
	ob := e.Start(e.Builder().Queue("wide", outbox.MaxPartitions, nil))
	counts := e.Counts()
	require.Equal(e.T, outbox.MaxPartitions, counts["partitions"])
	require.Equal(e.T, outbox.MaxPartitions, counts["processor"])
	_, err := ob.Enqueue(e.Ctx, e.DB, "wide", outbox.Message{Partition: outbox.MaxPartitions - 1, PayloadType: "t", Payload: []byte("x")})
	require.NoError(e.T, err)
	e.Eventually("the message sequenced in the last partition", func() bool {
		st, err := ob.Stats(e.Ctx)
		require.NoError(e.T, err)
		require.Len(e.T, st.Partitions, outbox.MaxPartitions)
		return st.Partitions[outbox.MaxPartitions-1].Unprocessed == 1
	})

	counts = e.Counts() // settled: nothing consumes the queue
	_, err = e.Builder().Queue("wider", outbox.MaxPartitions+1, nil).Start(e.Ctx)
	var ce *seqbox.ConfigError
	require.ErrorAs(e.T, err, &ce)
	require.Equal(e.T, counts, e.Counts(), "nothing registered")
}
