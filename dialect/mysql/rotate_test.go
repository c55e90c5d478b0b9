package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/rotatetest"
)

// rotateParams make the current generation always due (by size) and no
// closed one pinned.
var rotateParams = &dialect.TableRotateParams{Interval: time.Hour, Size: 1, Hold: time.Minute, LockTimeout: time.Second}

func newRotating(t *testing.T) (*bun.DB, *mysqlDialect, string) {
	t.Helper()
	db := dbtest.MySQL(t)
	prefix := dbtest.Prefix(t)
	d, err := New(t.Context(), db, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = d.Release()
		_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
	})
	return db, d.(*mysqlDialect), prefix
}

// closedAcked migrates fresh tables, moves messages ids into one queue's
// partition, acks them all and switches: generation 0 is closed, wholly
// acked, and ready to be truncated.
func closedAcked(t *testing.T, ids ...dialect.MessageID) (*bun.DB, *mysqlDialect, string, int64) {
	t.Helper()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(t.Context(), &dialect.SchemaMigrateParams{}))
	pid := rotatetest.OneQueue(t, d)
	rotatetest.EnqueueAndMove(t, db, d, pid, ids...)
	ackTo(t, db, prefix, len(ids))
	res, err := d.TableRotate(t.Context(), rotateParams)
	require.NoError(t, err)
	require.True(t, res.Switched)
	return db, d, prefix, pid
}

// ackTo moves the cursor of every partition to seq.
func ackTo(t *testing.T, db *bun.DB, prefix string, seq int) {
	t.Helper()
	_, err := db.NewRaw("UPDATE ? SET processed_seq = ?", bun.Ident(prefix+"processor"), seq).Exec(t.Context())
	require.NoError(t, err)
}

// TestRotateKilledWhileLocked: the rotating process dies at each stage of
// a truncation (its connection killed, and the round goes no further):
// holding body's lock before its check, after its TRUNCATE, and the same
// for outgoing. TRUNCATE cannot be rolled back, so what is already
// truncated stays so, and only acked rows were: nothing of the messages
// is lost, no acked one is reported pending, the generation is still
// closed, and the next round finishes it
// (docs/ROTATION.md, "MariaDB"). The crash and connection-fault cases of
// the conformance suite kill at random across rotations.
func TestRotateKilledWhileLocked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stage            string
		outgoing, bodies int
		lockedTable      string
	}{
		{"locked body", 3, 3, "body_g0"},
		{"truncated body", 3, 0, "body_g0"},
		{"locked outgoing", 3, 0, "outgoing_g0"},
		{"truncated outgoing", 0, 0, "outgoing_g0"},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			ctx := t.Context()
			db, d, prefix, pid := closedAcked(t, dialect.MessageID{1}, dialect.MessageID{2}, dialect.MessageID{3})

			ids := make(chan int64, 1)
			release := make(chan struct{})
			d.onRotate = func(ctx context.Context, at string, conn bun.Conn) error {
				if at != tc.stage {
					return nil
				}
				var id int64
				if err := conn.NewRaw("SELECT CONNECTION_ID()").Scan(ctx, &id); err != nil {
					return err
				}
				ids <- id
				<-release
				return errDied
			}
			done := make(chan error, 1)
			go func() {
				_, err := d.TableRotate(ctx, rotateParams)
				done <- err
			}()
			victim := <-ids
			var n int
			err := db.NewRaw("SET STATEMENT max_statement_time = 0.05 FOR SELECT COUNT(*) FROM ?", bun.Ident(prefix+tc.lockedTable)).Scan(ctx, &n)
			require.ErrorContains(t, err, "max_statement_time", "the rotator holds %s: no one else reads it", tc.lockedTable)
			_, err = db.ExecContext(ctx, "KILL ?", victim)
			require.NoError(t, err)
			for gone := false; !gone; {
				require.NoError(t, db.NewRaw("SELECT NOT EXISTS (SELECT 1 FROM information_schema.processlist WHERE id = ?)", victim).Scan(ctx, &gone))
			}
			close(release)
			require.ErrorIs(t, <-done, errDied)

			require.Equal(t, []string{"closed", "current", "empty"}, rotatetest.GenStates(t, db, prefix))
			require.Equal(t, tc.outgoing, rotatetest.Count(t, db, prefix+"outgoing_g0"))
			require.Equal(t, tc.bodies, rotatetest.Count(t, db, prefix+"body_g0"))
			pending, err := d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: []dialect.MessageID{{1}, {2}, {3}}})
			require.NoError(t, err)
			require.Empty(t, pending, "acked messages are not pending, whatever was truncated")
			d.onRotate = nil
			res, err := d.TableRotate(ctx, rotateParams)
			require.NoError(t, err)
			if tc.outgoing+tc.bodies > 0 {
				require.Equal(t, []int{0}, res.Truncated, "the next round truncates it")
			} else {
				require.Empty(t, res.Truncated, "nothing was left: marked empty without a lock")
			}
			require.Equal(t, "empty", rotatetest.GenStates(t, db, prefix)[0])
			require.Zero(t, rotatetest.Count(t, db, prefix+"body"))
			require.Equal(t, int64(3), d.lastSeq(t, pid), "the last seq handed out is the cursor")
		})
	}
}

// TestRotateStaleBodyKeepsItsOutgoing: a stale producer (one that has not
// read the generation) writes a message into the generation whose body
// table the round has just truncated, and it is moved and acked before
// the round locks outgoing. Its outgoing row stays beside its body until
// a round truncates both, so it is never reported pending: WaitProcessed
// reads a body without an outgoing row as a message not yet moved.
func TestRotateStaleBodyKeepsItsOutgoing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix, pid := closedAcked(t, dialect.MessageID{1})

	stale, err := New(ctx, db, prefix) // writes to generation 0 until it reads the current one
	require.NoError(t, err)
	t.Cleanup(func() { _ = stale.Release() })
	d.onRotate = func(ctx context.Context, at string, _ bun.Conn) error {
		if at != "between" {
			return nil
		}
		require.Zero(t, rotatetest.Count(t, db, prefix+"body_g0"), "body first")
		rotatetest.EnqueueAndMove(t, db, stale, pid, dialect.MessageID{2})
		ackTo(t, db, prefix, 2)
		return nil
	}
	res, err := d.TableRotate(ctx, &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Minute, LockTimeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused, "the stale body holds outgoing back")
	require.Equal(t, 2, rotatetest.Count(t, db, prefix+"outgoing_g0"), "seq 1's, whose body is gone, and the stale message's")
	require.Equal(t, 1, rotatetest.Count(t, db, prefix+"body_g0"), "the stale message's")
	pending, err := d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: []dialect.MessageID{{1}, {2}}})
	require.NoError(t, err)
	require.Empty(t, pending)

	d.onRotate = nil
	res, err = d.TableRotate(ctx, &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Minute, LockTimeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Truncated, "the next round truncates both")
	require.Zero(t, rotatetest.Count(t, db, prefix+"outgoing"))
	require.Zero(t, rotatetest.Count(t, db, prefix+"body"))
}

// errDied stops a round where a test's process dies.
var errDied = errors.New("the rotating process died here")

// lastSeq is partition pid's last seq handed out, as Stats reads it.
func (d *mysqlDialect) lastSeq(t *testing.T, pid int64) int64 {
	t.Helper()
	st, err := d.PartitionStats(t.Context(), &dialect.PartitionStatsParams{PartitionID: pid})
	require.NoError(t, err)
	require.Len(t, st, 1)
	return st[0].Sequence
}

// TestRotateNeverMakesPipelineVictim: a pipeline transaction that holds
// one of a generation's tables and then reads the other (a transactional
// handler's lock statement probes outgoing, then its batch read reads
// outgoing and body) while the rotator waits for that generation is never
// a deadlock's victim. Locking both tables in one LOCK TABLES did that:
// the server takes them in the order of their names, body first, and held
// body while it waited for outgoing (docs/ROTATION.md, "MariaDB"). Each
// order of the two reads is tried; the transaction has the pipeline's
// isolation, READ COMMITTED.
func TestRotateNeverMakesPipelineVictim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, then, waitsFor string }{
		// The rotator takes body first: it waits for the transaction's body.
		{"body_g0", "outgoing_g0", "body_g0"},
		// The body table is free: truncated (all acked), then the rotator
		// waits for outgoing, and the transaction reads the emptied body.
		{"outgoing_g0", "body_g0", "outgoing_g0"},
	} {
		t.Run(tc.first, func(t *testing.T) {
			ctx := t.Context()
			db, d, prefix, _ := closedAcked(t, dialect.MessageID{1})

			tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			require.Equal(t, 1, rotatetest.Count(t, tx, prefix+tc.first))
			done := make(chan dialect.TableRotateResult, 1)
			go func() {
				res, err := d.TableRotate(ctx, &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Minute, LockTimeout: 30 * time.Second})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			for waiting := false; !waiting; {
				require.NoError(t, db.NewRaw(`SELECT EXISTS (SELECT 1 FROM information_schema.processlist
WHERE state = 'Waiting for table metadata lock' AND info LIKE ?)`, "%LOCK TABLES%"+prefix+tc.waitsFor+"%").Scan(ctx, &waiting))
			}
			rotatetest.Count(t, tx, prefix+tc.then) // the pipeline's transaction reads on
			require.NoError(t, tx.Commit())
			require.Equal(t, []int{0}, (<-done).Truncated)
			require.Equal(t, 0, rotatetest.Count(t, db, prefix+"body"))
			require.Equal(t, 0, rotatetest.Count(t, db, prefix+"outgoing"))
		})
	}
}

// TestMigrateRotationFromVersion10: tables of release 10 with rows in every
// stage become generation 0, and the pipeline goes on from where it was:
// the unmoved message is moved with the next seq, the unacked ones are
// read, and once all are acked generation 0 is truncated. The partition
// gets its stops (migration 012). The migrations run again without error
// (each statement is safe to run again).
func TestMigrateRotationFromVersion10(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	s, err := kit.LoadSchema(migrationFS)
	require.NoError(t, err)
	s.Migrations = s.Migrations[:10]
	stmts, err := s.Render(prefix)
	require.NoError(t, err)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err)
	}
	id := func(i byte) []byte { id := dialect.MessageID{i}; return id[:] }
	rotatetest.Release(t, db, prefix, stmts, 10)
	// Release 10's rows: seq 1 acked, seq 2 sequenced, one message incoming.
	exec("INSERT INTO ? (id, queue, partition_no) VALUES (1, 'q', 0)", bun.Ident(prefix+"partitions"))
	exec("INSERT INTO ? (partition_id, processed_seq) VALUES (1, 1)", bun.Ident(prefix+"processor"))
	exec("INSERT INTO ? (partition_id, pruned_seq) VALUES (1, 0)", bun.Ident(prefix+"vacuum_counter"))
	for i := 1; i <= 3; i++ {
		exec("INSERT INTO ? (id, payload_type, payload, created_at) VALUES (?, 't', ?, UTC_TIMESTAMP(6))",
			bun.Ident(prefix+"body"), id(byte(i)), []byte{byte('a' + i)})
	}
	exec("INSERT INTO ? (partition_id, seq, body_id, sequenced_at) VALUES (1, 1, ?, UTC_TIMESTAMP(6)), (1, 2, ?, UTC_TIMESTAMP(6))",
		bun.Ident(prefix+"outgoing"), id(1), id(2))
	exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), id(3))

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st.Latest, st.Current)
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body_g0"), "the rows are generation 0's")
	require.Equal(t, 2, rotatetest.Count(t, db, prefix+"outgoing_g0"))
	require.Equal(t, []string{"current", "empty", "empty"}, rotatetest.GenStates(t, db, prefix))
	m11, err := kit.LoadSchema(migrationFS)
	require.NoError(t, err)
	m11.Bootstrap = "SELECT 1"
	m11.Migrations = m11.Migrations[10:12] // 011 and 012
	again, err := m11.Render(prefix)
	require.NoError(t, err)
	for _, q := range again[1:] {
		exec(q)
	}
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body"), "a second run changes nothing")
	var stops []int64
	require.NoError(t, db.NewRaw("SELECT id FROM ? WHERE partition_id = 1 AND id <= 0 ORDER BY id", bun.Ident(prefix+"incoming")).Scan(ctx, &stops))
	require.Equal(t, []int64{-3, -2}, stops, "migration 012 gives the existing partition its stops, once")

	rotatetest.UpgradedGoesOn(t, db, d, d, prefix, rotateParams)
}

// TestRotateStateLooksUpItsTables: the round's State reads each
// generation's size from information_schema by a lookup of the table's
// name, never by opening every table of the schema, which costs a round in
// proportion to the application's tables. EXPLAIN says which: "Scanned 0
// databases" is a lookup, "Scanned 1 database" a scan. A name computed per
// row or an IN list scans (checked).
func TestRotateStateLooksUpItsTables(t *testing.T) {
	db, d, _ := newRotating(t)
	ctx := t.Context()
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	text, err := d.Runner.Render(db.QueryGen(), rotateSQL.State, kit.Args{"interval_us": int64(time.Hour / time.Microsecond)})
	require.NoError(t, err)
	rows, err := db.QueryContext(ctx, "EXPLAIN "+text)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	lookups := 0
	var plan []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		extra := vals[len(cols)-1].String // EXPLAIN's last column is Extra
		plan = append(plan, extra)
		require.NotContains(t, extra, "Scanned 1 database", "a scan of the schema in State's plan")
		if strings.Contains(extra, "Scanned 0 databases") {
			lookups++
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 2*kit.Generations, lookups, "one lookup per generation table: %+v", plan)
}

// TestRotateSwitchAllOrNothing: see rotatetest.SwitchAllOrNothing.
func TestRotateSwitchAllOrNothing(t *testing.T) {
	t.Parallel()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(t.Context(), &dialect.SchemaMigrateParams{}))
	rotatetest.SwitchAllOrNothing(t, db, prefix, func(from, to int) (sql.Result, error) {
		return d.Exec(t.Context(), db, rotateSQL.Switch, kit.Args{"from": from, "to": to})
	})
}
