package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/rotatetest"
	"github.com/seqbox/seqbox/vacuum"
)

// rotateParams make the current generation always due (by size) and no
// closed one pinned.
var rotateParams = &dialect.TableRotateParams{Interval: time.Hour, Size: 1, Hold: time.Minute, LockTimeout: time.Second}

func newRotating(t *testing.T) (*bun.DB, dialect.Dialect, string) {
	t.Helper()
	db := dbtest.Postgres(t)
	prefix := dbtest.Prefix(t)
	d, err := postgres.New(db, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = d.Release()
		_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
	})
	return db, d, prefix
}

// TestRotateKilledBetweenLockAndTruncate: the rotator's connection is
// killed while it holds generation 0's tables, once after the lock and
// before the checks, once after the TRUNCATE and before the commit. Either
// way the transaction rolls back: the rows are all there, the generation
// is still closed, and the next round truncates it (docs/ROTATION.md). A
// SIGKILLed process ends its connections the same way; the crash and
// connection-fault cases of the conformance suite kill at random across
// rotations.
func TestRotateKilledBetweenLockAndTruncate(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"locked", "truncated"} {
		t.Run(stage, func(t *testing.T) {
			ctx := t.Context()
			db, d, prefix := newRotating(t)
			require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
			pid := rotatetest.OneQueue(t, d)
			rotatetest.EnqueueAndMove(t, db, d, pid, dialect.MessageID{1}, dialect.MessageID{2}, dialect.MessageID{3})
			_, err := db.NewRaw("UPDATE ? SET processed_seq = 3", bun.Ident(prefix+"processor")).Exec(ctx)
			require.NoError(t, err)
			r := d.(vacuum.Rotator)
			res, err := r.TableRotate(ctx, rotateParams)
			require.NoError(t, err)
			require.True(t, res.Switched)

			pids := make(chan int64, 1)
			release := make(chan struct{})
			postgres.OnRotate(d, func(ctx context.Context, at string, tx bun.Tx) error {
				if at != stage {
					return nil
				}
				var pid int64
				if err := tx.NewRaw("SELECT pg_backend_pid()").Scan(ctx, &pid); err != nil {
					return err
				}
				pids <- pid
				<-release
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := r.TableRotate(ctx, rotateParams)
				done <- err
			}()
			backend := <-pids
			var held int
			require.NoError(t, db.NewRaw(`SELECT COUNT(*) FROM pg_locks WHERE pid = ? AND granted AND mode = 'AccessExclusiveLock'
	AND relation IN (to_regclass(?)::oid, to_regclass(?)::oid)`, backend, prefix+"body_g0", prefix+"outgoing_g0").Scan(ctx, &held))
			require.Equal(t, 2, held, "the rotator holds generation 0's tables")
			var ok bool
			require.NoError(t, db.NewRaw("SELECT pg_terminate_backend(?)", backend).Scan(ctx, &ok))
			require.True(t, ok)
			for gone := false; !gone; {
				require.NoError(t, db.NewRaw("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ?)", backend).Scan(ctx, &gone))
			}
			close(release)
			require.Error(t, <-done, "the round fails with its connection")

			require.Equal(t, []string{"closed", "current", "empty"}, rotatetest.GenStates(t, db, prefix))
			require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body_g0"), "nothing truncated")
			require.Equal(t, 3, rotatetest.Count(t, db, prefix+"outgoing_g0"))
			postgres.OnRotate(d, nil)
			res, err = r.TableRotate(ctx, rotateParams)
			require.NoError(t, err)
			require.Equal(t, []int{0}, res.Truncated, "the next round truncates it")
			require.Zero(t, rotatetest.Count(t, db, prefix+"body"))
		})
	}
}

// TestMigrateRotationFromVersion10: tables of release 10 with rows in every
// stage become generation 0 of the partitioned tables, and the pipeline
// goes on from where it was: the unmoved message is moved with the next
// seq, the unacked ones are read, and once all are acked generation 0 is
// truncated. The migration runs again without error (its statements are
// idempotent, the table swap one statement).
func TestMigrateRotationFromVersion10(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix, exec := atRelease(t, 10)
	// Release 10's rows: seq 1 acked, seq 2 sequenced, one message incoming.
	exec("INSERT INTO ? (id, queue, partition_no) VALUES (1, 'q', 0)", bun.Ident(prefix+"partitions"))
	exec("INSERT INTO ? (partition_id, processed_seq) VALUES (1, 1)", bun.Ident(prefix+"processor"))
	exec("INSERT INTO ? (partition_id, pruned_seq) VALUES (1, 0)", bun.Ident(prefix+"vacuum_counter"))
	for i := 1; i <= 3; i++ {
		exec("INSERT INTO ? (id, payload_type, payload) VALUES (?, 't', ?)", bun.Ident(prefix+"body"), []byte{byte(i)}, []byte{byte('a' + i)})
	}
	exec("INSERT INTO ? (partition_id, seq, body_id) VALUES (1, 1, ?), (1, 2, ?)", bun.Ident(prefix+"outgoing"), []byte{1}, []byte{2})
	exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), []byte{3})

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st.Latest, st.Current)
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body_g0"), "the rows are generation 0's")
	require.Equal(t, 2, rotatetest.Count(t, db, prefix+"outgoing_g0"))
	require.Equal(t, []string{"current", "empty", "empty"}, rotatetest.GenStates(t, db, prefix))
	stmts, err := postgres.Migration(prefix, 11)
	require.NoError(t, err)
	for _, q := range stmts {
		exec(q)
	}
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body"), "a second run changes nothing")

	rotatetest.UpgradedGoesOn(t, db, d, d.(vacuum.Rotator), prefix, rotateParams)
}

// TestBatchReadProbesOneGeneration: the batch read goes through the
// partitioned parents and reads each message's body in its own generation
// only: one primary-key probe per message, the other generations pruned at
// run time ("never executed"). A probe by id alone tries the generations in
// turn, up to three probes per message (docs/ROTATION.md, "Shape").
func TestBatchReadProbesOneGeneration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pid := rotatetest.OneQueue(t, d)
	r := d.(vacuum.Rotator)
	for g := range 3 {
		rotatetest.EnqueueAndMove(t, db, d, pid, dialect.MessageID{byte(g), 1}, dialect.MessageID{byte(g), 2})
		if g < 2 {
			res, err := r.TableRotate(ctx, rotateParams)
			require.NoError(t, err)
			require.Equal(t, g+1, res.Current)
		}
	}
	for g := range 3 {
		require.Equal(t, 2, rotatetest.Count(t, db, prefix+"body_g"+string(rune('0'+g))), "generation %d", g)
	}
	query, err := postgres.RenderBatchRead(d, db, pid, 0, 100)
	require.NoError(t, err)
	var out []byte
	require.NoError(t, db.QueryRowContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+query).Scan(&out))
	plan := explained(t, out)
	probes := 0
	for g := range 3 {
		probes += plan.loops(prefix + "body_g" + string(rune('0'+g)))
	}
	require.Equal(t, 6, probes, "one body probe per message:\n%s", out)
}

func (n planNode) loops(table string) int {
	total := 0
	if n.Relation == table {
		total += int(n.Loops)
	}
	for _, c := range n.Plans {
		total += c.loops(table)
	}
	return total
}

// TestRotateSwitchAllOrNothing: see rotatetest.SwitchAllOrNothing.
func TestRotateSwitchAllOrNothing(t *testing.T) {
	t.Parallel()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(t.Context(), &dialect.SchemaMigrateParams{}))
	rotatetest.SwitchAllOrNothing(t, db, prefix, func(from, to int) (sql.Result, error) {
		return postgres.SwitchGenerations(t.Context(), d, from, to)
	})
}

// TestMigrateBoundsFromVersion13: migration 14 carries each partition's
// lower bound from partitions.incoming_xid to its own table, and the next
// move reads from it, moves the row above it and replaces it: one live
// bound per partition, never below the one carried.
func TestMigrateBoundsFromVersion13(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix, exec := atRelease(t, 13)
	exec("INSERT INTO ? (id, queue, partition_no) VALUES (1, 'q', 0), (2, 'q', 1)", bun.Ident(prefix+"partitions"))
	exec("INSERT INTO ? (partition_id, processed_seq) VALUES (1, 0), (2, 0)", bun.Ident(prefix+"processor"))
	exec("UPDATE ? SET incoming_xid = pg_current_xact_id() WHERE id = 1", bun.Ident(prefix+"partitions"))
	var carried int64
	require.NoError(t, db.NewRaw("SELECT (incoming_xid::text)::bigint FROM ? WHERE id = 1", bun.Ident(prefix+"partitions")).Scan(ctx, &carried))
	exec("INSERT INTO ? (id, payload_type, payload) VALUES (?, 't', 'x')", bun.Ident(prefix+"body"), []byte{1})
	exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), []byte{1})

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	bounds := func(pid int64) []int64 {
		var b []int64
		require.NoError(t, db.NewRaw("SELECT (xid::text)::bigint FROM ? WHERE partition_id = ?", bun.Ident(prefix+"partitions_bound"), pid).Scan(ctx, &b))
		return b
	}
	require.Equal(t, []int64{carried}, bounds(1), "the bound carried over")
	require.Empty(t, bounds(2), "a partition no move advanced has none: it reads from 0")

	res, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: 1, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved, "the row above the carried bound")
	after := bounds(1)
	require.Len(t, after, 1, "the move replaced the bound it read")
	require.GreaterOrEqual(t, after[0], carried, "never below the bound carried")
	// The bound passes the carried one once no transaction older than it
	// is running; on the shared server another test's may still be. Move
	// a row at a time until it has: each move keeps one live bound.
	for deadline := time.Now().Add(30 * time.Second); after[0] <= carried; {
		require.True(t, time.Now().Before(deadline), "the bound never passed the carried one (a failure bound)")
		exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), []byte{1})
		res, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: 1, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, 1, res.Moved)
		after = bounds(1)
		require.Len(t, after, 1, "one live bound per partition")
	}
}

// TestMigrateProcessorVersionsFromVersion14: migration 15 keys the
// processor row by (partition_id, version), each row at version 0 with its
// state, and writes the table's floor of pages. A process of the earlier
// release still running updates the row in place and stays correct; one
// registering queues fails instead of adding a second row. Registration
// after the rows moved past version 0 adds none.
func TestMigrateProcessorVersionsFromVersion14(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix, exec := atRelease(t, 14)
	processor := bun.Ident(prefix + "processor")
	exec("INSERT INTO ? (id, queue, partition_no) VALUES (1, 'q', 0), (2, 'q', 1)", bun.Ident(prefix+"partitions"))
	exec("INSERT INTO ? (partition_id, processed_seq, attempts, last_error) VALUES (1, 0, 2, 'boom'), (2, 5, 0, NULL)", processor)
	exec("INSERT INTO ? (partition_id) VALUES (1), (2)", bun.Ident(prefix+"vacuum_counter"))
	exec("INSERT INTO ? (id, payload_type, payload) VALUES (?, 't', 'x')", bun.Ident(prefix+"body"), []byte{1})
	exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), []byte{1})

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	moved, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: 1, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, moved.Moved)
	type row struct {
		PartitionID  int64 `bun:"partition_id"`
		Version      int64 `bun:"version"`
		ProcessedSeq int64 `bun:"processed_seq"`
		Attempts     int   `bun:"attempts"`
	}
	rows := func() []row {
		var out []row
		require.NoError(t, db.NewRaw("SELECT partition_id, version, processed_seq, attempts FROM ? ORDER BY partition_id", processor).Scan(ctx, &out))
		return out
	}
	require.Equal(t, []row{{1, 0, 0, 2}, {2, 0, 5, 0}}, rows(), "the state carried over, at version 0")
	var pages int64
	require.NoError(t, db.NewRaw("SELECT pg_relation_size(?) / 8192", prefix+"processor").Scan(ctx, &pages))
	require.GreaterOrEqual(t, pages, int64(32), "the floor of pages")

	_, err = db.ExecContext(ctx, "INSERT INTO ? (partition_id) VALUES (1) ON CONFLICT DO NOTHING", processor)
	require.ErrorContains(t, err, "23502", "an earlier release's registration fails")
	exec("UPDATE ? SET attempts = 3 WHERE partition_id = 1", processor) // an earlier release's write, in place

	lease, err := d.ProcessorLease(ctx, &dialect.ProcessorLeaseParams{PartitionID: 1, Owner: "o", Duration: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.True(t, lease.Leased)
	require.Equal(t, 3, lease.State.Attempts, "the lease reads the row the earlier release wrote")
	require.Len(t, lease.Messages, 1)
	require.NoError(t, d.ProcessorAck(ctx, &dialect.ProcessorUpdateParams{PartitionID: 1, Owner: "o", ProcessedSeq: 1}))
	require.Equal(t, []row{{1, 2, 1, 0}, {2, 0, 5, 0}}, rows(), "a new version per write, one row per partition")

	_, err = d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 2}}})
	require.NoError(t, err)
	require.Len(t, rows(), 2, "registration adds no row beside a current one")
}

// atRelease returns a rotating dialect's database with its schema at
// release version, and an exec for the rows that release would have
// written.
func atRelease(t *testing.T, version int) (*bun.DB, dialect.Dialect, string, func(q string, args ...any)) {
	t.Helper()
	db, d, prefix := newRotating(t)
	require.NoError(t, postgres.MigrateTo(t.Context(), db, prefix, version))
	return db, d, prefix, execer(t, db)
}

// execer runs statements on db that must succeed.
func execer(t *testing.T, db *bun.DB) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(t.Context(), q, args...)
		require.NoError(t, err)
	}
}
