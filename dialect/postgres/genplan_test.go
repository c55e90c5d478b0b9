package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/rotatetest"
	"github.com/seqbox/seqbox/vacuum"
)

// TestGenericPlansProbeEveryGeneration: no prepared statement's generic
// plan scans a generation sequentially, whatever VACUUM or ANALYZE
// recorded of it while it was empty. Such a plan is kept until something
// invalidates it, while the generation refills: one grouped batch read
// took 85 s in an autovacuum-on soak (docs/ROTATION.md, "Statistics of an
// emptied generation"). Checked on a new schema, after a truncation, and
// after an operator's VACUUM FULL of an empty generation, each time with
// the generations' statistics taken while they hold no row.
func TestGenericPlansProbeEveryGeneration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	statements := postgres.PreparedStatements(d)
	require.NotEmpty(t, statements)
	gens := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(body|outgoing)_g[0-2]$`)

	vacuumGenerations := func(full bool) {
		t.Helper()
		for g := range 3 {
			for _, table := range []string{"body", "outgoing"} {
				stmt := "VACUUM ANALYZE ?"
				if full {
					stmt = "VACUUM (FULL, ANALYZE) ?"
				}
				_, err := db.ExecContext(ctx, stmt, bun.Ident(prefix+table+"_g"+strconv.Itoa(g)))
				require.NoError(t, err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan")
		require.NoError(t, err)
		bad := map[string][]string{}
		for name, text := range statements {
			if seq := genericSeqScans(t, ctx, conn, text, gens); len(seq) > 0 {
				bad[name] = seq
			}
		}
		require.Emptyf(t, bad, "%s: generic plans that scan generations sequentially", when)
	}

	vacuumGenerations(false)
	check("a new schema, vacuumed")

	pid := rotatetest.OneQueue(t, d)
	r := d.(vacuum.Rotator)
	rotatetest.EnqueueAndMove(t, db, d, pid, dialect.MessageID{1}, dialect.MessageID{2})
	res, err := r.TableRotate(ctx, rotateParams)
	require.NoError(t, err)
	require.True(t, res.Switched)
	_, err = db.ExecContext(ctx, "UPDATE ? SET processed_seq = 2 WHERE partition_id = ?", bun.Ident(d.Tables().Processor), pid)
	require.NoError(t, err)
	res, err = r.TableRotate(ctx, rotateParams)
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Truncated)
	vacuumGenerations(false)
	check("a truncated generation, vacuumed")

	vacuumGenerations(true)
	_, err = r.TableRotate(ctx, rotateParams)
	require.NoError(t, err)
	vacuumGenerations(false)
	check("generations rewritten by VACUUM FULL, then a round")
}

// genericSeqScans prepares text on conn, whose plan_cache_mode forces
// generic plans, and returns the relations matching tables that its plan
// scans sequentially.
func genericSeqScans(t *testing.T, ctx context.Context, conn bun.Conn, text string, tables *regexp.Regexp) []string {
	t.Helper()
	_, err := conn.ExecContext(ctx, "PREPARE seqbox_plan_check AS "+text)
	require.NoError(t, err, text)
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "DEALLOCATE seqbox_plan_check") }()
	var n int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'seqbox_plan_check'").Scan(&n))
	args := ""
	for i := range n {
		if i > 0 {
			args += ", "
		}
		args += "NULL"
	}
	var out []byte
	require.NoError(t, conn.QueryRowContext(ctx, fmt.Sprintf("EXPLAIN (FORMAT JSON) EXECUTE seqbox_plan_check(%s)", args)).Scan(&out))
	return explained(t, out).seqScans(tables)
}

// TestMoveGenericPlansScanNoTable: the statements a move runs after its
// lock are planned once, generic, under the settings the lock gives the
// move's transaction, and none of those plans scans a table sequentially,
// though made while every table is empty: such a plan is kept for the
// connection's life (a DELETE by ctid planned as a scan of incoming took
// 0.5–0.8 s per move; sequencer.go).
func TestMoveGenericPlansScanNoTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pid := rotatetest.OneQueue(t, d)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN")
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") }()
	locked, err := postgres.MoveLock(ctx, d, conn, []int64{pid})
	require.NoError(t, err)
	require.Equal(t, 1, locked)
	var mode string
	require.NoError(t, conn.QueryRowContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "force_generic_plan", mode, "the lock makes the rest of the move's plans generic")

	tables := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix))
	checked, bad := 0, map[string][]string{}
	for name, text := range postgres.PreparedStatements(d) {
		if !strings.HasPrefix(name, "moves.") && !strings.HasPrefix(name, "WriteSQL.") {
			continue
		}
		checked++
		if seq := genericSeqScans(t, ctx, conn, text, tables); len(seq) > 0 {
			bad[name] = seq
		}
	}
	require.GreaterOrEqual(t, checked, 6, "the move's prepared statements")
	require.Empty(t, bad, "generic plans of the move that scan tables sequentially")
}

// TestGroupLocksPlannedOnce: the group lease's and ack's row locks, run
// with one or two partitions as they mostly are, switch to their generic
// plan after the server's five custom ones. With the partitions' array a
// bare parameter each custom plan counted its one or two elements where
// the generic plan guessed ten, looked cheaper, and the statement was
// planned on every call (group.go; BENCHMARKS.md, "The group locks
// prepared").
func TestGroupLocksPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, _ := newRotating(t)
	var version int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version))
	if version < 140000 {
		t.Skipf("pg_prepared_statements counts generic plans from PostgreSQL 14 on; the server is %d", version)
	}
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pid := rotatetest.OneQueue(t, d)
	statements := postgres.PreparedStatements(d)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for name, args := range map[string]string{
		"GroupSQL.LockLeasable": fmt.Sprintf("'{%d}'", pid),
		"GroupSQL.LockOwned":    fmt.Sprintf("'{%d}', 'o'", pid),
	} {
		text, ok := statements[name]
		require.Truef(t, ok, "%s is prepared", name)
		_, err := conn.ExecContext(ctx, "PREPARE seqbox_group_lock AS "+text)
		require.NoError(t, err, text)
		for range 8 {
			_, err := conn.ExecContext(ctx, "EXECUTE seqbox_group_lock("+args+")")
			require.NoError(t, err)
		}
		var generic, custom int
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'seqbox_group_lock'").Scan(&generic, &custom))
		_, err = conn.ExecContext(ctx, "DEALLOCATE seqbox_group_lock")
		require.NoError(t, err)
		require.Positivef(t, generic, "%s: %d custom plans in 8 runs and no generic one:\n%s", name, custom, text)
	}
}
