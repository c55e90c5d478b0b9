// Package rotatetest holds what the rotated tables' tests of every dialect
// share (docs/ROTATION.md): a queue of one partition, messages written and
// moved, a table's rows, the generations' states. It imports no dialect,
// so that each dialect's own tests can use it.
package rotatetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// OneQueue registers queue "q" of one partition and returns its id.
func OneQueue(t *testing.T, d dialect.Dialect) int64 {
	t.Helper()
	ids, err := d.QueueRegister(t.Context(), &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 1}}})
	require.NoError(t, err)
	return ids[0][0]
}

// EnqueueAndMove writes a message per id to partition pid and moves them.
func EnqueueAndMove(t *testing.T, db *bun.DB, d dialect.Dialect, pid int64, ids ...dialect.MessageID) {
	t.Helper()
	ctx := t.Context()
	rows := make([]dialect.MessageRow, len(ids))
	for i, id := range ids {
		rows[i] = dialect.MessageRow{ID: id, PartitionID: pid, PayloadType: "t", Payload: []byte("p")}
	}
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, Rows: rows, ChunkRows: 100, ChunkBytes: 1 << 20}))
	_, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
	require.NoError(t, err)
}

// Count is the number of rows of table, read on db (a transaction too).
func Count(t *testing.T, db bun.IDB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(table)).Scan(t.Context(), &n))
	return n
}

// GenStates is every generation's state, by gen.
func GenStates(t *testing.T, db *bun.DB, prefix string) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.NewRaw("SELECT state FROM ? ORDER BY gen", bun.Ident(prefix+"generations")).Scan(t.Context(), &out))
	return out
}

// UpgradedGoesOn checks that the pipeline goes on from where release
// tables left it, once migrated to generations: partition 1 with seq 1
// acked, seq 2 sequenced and a third message incoming, bodies 'b', 'c',
// 'd' (the migration tests of each dialect write them). The unmoved
// message is moved with the next seq, the unacked ones are read, and once
// all are acked generation 0 is truncated and pruned_seq says so. r
// rotates d's tables; params make the current generation always due.
func UpgradedGoesOn(t *testing.T, db *bun.DB, d dialect.Dialect, r interface {
	TableRotate(context.Context, *dialect.TableRotateParams) (dialect.TableRotateResult, error)
}, prefix string, params *dialect.TableRotateParams) {
	t.Helper()
	ctx := t.Context()
	res, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: 1, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.FirstSeq, "numbering goes on")
	msgs, err := d.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: db, PartitionID: 1, AfterSeq: 1, Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, []byte{'a' + 2}, msgs[0].Payload)
	require.Equal(t, []byte{'a' + 3}, msgs[1].Payload)

	rot, err := r.TableRotate(ctx, params)
	require.NoError(t, err)
	require.True(t, rot.Switched)
	rot, err = r.TableRotate(ctx, params)
	require.NoError(t, err)
	require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, rot.Refused)
	_, err = db.NewRaw("UPDATE ? SET processed_seq = 3", bun.Ident(prefix+"processor")).Exec(ctx)
	require.NoError(t, err)
	rot, err = r.TableRotate(ctx, params)
	require.NoError(t, err)
	require.Equal(t, []int{0}, rot.Truncated)
	require.Zero(t, Count(t, db, prefix+"body"))
	require.Zero(t, Count(t, db, prefix+"outgoing"))
	var pruned int64
	require.NoError(t, db.NewRaw("SELECT pruned_seq FROM ?", bun.Ident(prefix+"vacuum_counter")).Scan(ctx, &pruned))
	require.Equal(t, int64(3), pruned)
}

// Release makes prefix's tables as a release that had only the first
// version migrations left them: stmts are those migrations rendered (with
// the bootstrap), run here, and the versions 1..version recorded.
func Release(t *testing.T, db *bun.DB, prefix string, stmts []string, version int) {
	t.Helper()
	ctx := t.Context()
	for _, q := range stmts {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for v := 1; v <= version; v++ {
		_, err := db.ExecContext(ctx, "INSERT INTO ? (version) VALUES (?)", bun.Ident(prefix+"schema_version"), v)
		require.NoError(t, err)
	}
}

// SwitchAllOrNothing checks a dialect's RotateSQL.Switch (run by sw) on
// the generations of prefix's fresh tables: from a current generation to
// an empty one it changes both rows and moves the prune's hold with the
// current row; where either row is not what the switch expects (a rotator
// that read the states before another switched them) it changes neither,
// so that no race leaves two current generations, or none.
func SwitchAllOrNothing(t *testing.T, db *bun.DB, prefix string, sw func(from, to int) (sql.Result, error)) {
	t.Helper()
	gens := bun.Ident(prefix + "generations")
	set := func(states ...string) {
		t.Helper()
		for g, s := range states {
			_, err := db.NewRaw("UPDATE ? SET state = ? WHERE gen = ?", gens, s, g).Exec(t.Context())
			require.NoError(t, err)
		}
	}
	run := func(from, to int) int64 {
		t.Helper()
		res, err := sw(from, to)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		return n
	}
	for _, stale := range [][]string{
		{"closed", "empty", "current"},  // from was switched away: to must not become a second current
		{"current", "closed", "empty"},  // to is not empty: from must not close, leaving none
		{"closed", "current", "closed"}, // neither
	} {
		set(stale...)
		require.Zero(t, run(0, 1), "switch 0 -> 1 from %v", stale)
		require.Equal(t, stale, GenStates(t, db, prefix), "nothing changed")
	}
	set("current", "empty", "empty")
	_, err := db.NewRaw("UPDATE ? SET prune_held_until = ? WHERE gen = 0", gens, time.Now().Add(time.Hour).UTC()).Exec(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(2), run(0, 1))
	require.Equal(t, []string{"closed", "current", "empty"}, GenStates(t, db, prefix))
	var held []bool
	require.NoError(t, db.NewRaw("SELECT prune_held_until IS NOT NULL FROM ? ORDER BY gen", gens).Scan(t.Context(), &held))
	require.Equal(t, []bool{false, true, false}, held, "the prune's hold moves with the current row")
}
