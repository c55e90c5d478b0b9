package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/rotatetest"
)

// rotateParams make the current generation always due (by size: every
// generation takes its root pages) and no closed one pinned.
var rotateParams = &dialect.TableRotateParams{Interval: time.Hour, Size: 1, Hold: time.Minute, LockTimeout: time.Second}

// openRotating opens a fresh database file as internal/dbtest does (which
// this package cannot import: it imports this package) and a dialect on
// it, with no table yet.
func openRotating(t *testing.T) (*bun.DB, *sqliteDialect, string) {
	t.Helper()
	sqldb, err := sql.Open(sqliteshim.ShimName, DSN(sqliteshim.DriverName(), filepath.Join(t.TempDir(), "seqbox.db")))
	require.NoError(t, err)
	sqldb.SetMaxOpenConns(24)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	t.Cleanup(func() { _ = db.Close() })
	const prefix = "sbt_"
	d, err := New(db, prefix)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Release() })
	return db, d.(*sqliteDialect), prefix
}

// objectType is what sqlite_master says name is ("table", "view"), or "".
func objectType(t *testing.T, db *bun.DB, name string) string {
	t.Helper()
	var types []string
	require.NoError(t, db.NewRaw("SELECT type FROM sqlite_master WHERE name = ?", name).Scan(t.Context(), &types))
	return strings.Join(types, ",")
}

// TestMigrateRotationFromVersion9: tables of release 9 (the last before
// migration 010) with rows in every stage become generation 0, and the
// pipeline goes on from where it was: the unmoved message is moved with
// the next seq, the unacked ones are read, and once all are acked
// generation 0 is truncated. The migration's RENAMEs cannot run twice, so
// a run that fails half-way must leave release 9's tables as they were:
// the migrations and their version records are one transaction, rolled
// back on failure.
func TestMigrateRotationFromVersion9(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := openRotating(t)
	s, err := kit.LoadSchema(migrationFS)
	require.NoError(t, err)
	require.Len(t, s.Migrations, 10, "migration 010 is this test's")
	s.Migrations = s.Migrations[:9]
	stmts, err := s.Render(prefix)
	require.NoError(t, err)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err)
	}
	id := func(i byte) []byte { id := dialect.MessageID{i}; return id[:] }
	rotatetest.Release(t, db, prefix, stmts, 9)
	// Release 9's rows: seq 1 acked, seq 2 sequenced, one message incoming.
	const now = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
	exec("INSERT INTO ? (id, queue, partition_no) VALUES (1, 'q', 0)", bun.Ident(prefix+"partitions"))
	exec("INSERT INTO ? (partition_id, processed_seq) VALUES (1, 1)", bun.Ident(prefix+"processor"))
	exec("INSERT INTO ? (partition_id, pruned_seq) VALUES (1, 0)", bun.Ident(prefix+"vacuum_counter"))
	for i := 1; i <= 3; i++ {
		exec("INSERT INTO ? (id, payload_type, payload, created_at) VALUES (?, 't', ?, "+now+")",
			bun.Ident(prefix+"body"), id(byte(i)), []byte{byte('a' + i)})
	}
	exec("INSERT INTO ? (partition_id, seq, body_id, sequenced_at) VALUES (1, 1, ?, "+now+"), (1, 2, ?, "+now+")",
		bun.Ident(prefix+"outgoing"), id(1), id(2))
	exec("INSERT INTO ? (partition_id, body_id) VALUES (1, ?)", bun.Ident(prefix+"incoming"), id(3))

	// A table in the way of the migration's last statement: it fails after
	// the RENAMEs, the views and the new column, and all of it rolls back.
	exec("CREATE TABLE ? (x INTEGER)", bun.Ident(prefix+"generations"))
	require.Error(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, 9, st.Current, "nothing of migration 010 was kept")
	require.Equal(t, "table", objectType(t, db, prefix+"body"))
	require.Equal(t, "table", objectType(t, db, prefix+"outgoing"))
	require.Empty(t, objectType(t, db, prefix+"body_g0"))
	require.Empty(t, objectType(t, db, prefix+"outgoing_g1"))
	require.Error(t, db.NewRaw("SELECT body_gen FROM ?", bun.Ident(prefix+"incoming")).Scan(ctx, new([]int)), "incoming has no body_gen yet")
	exec("DROP TABLE ?", bun.Ident(prefix+"generations"))

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st, err = d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st.Latest, st.Current)
	require.Equal(t, "view", objectType(t, db, prefix+"body"))
	require.Equal(t, "view", objectType(t, db, prefix+"outgoing"))
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body_g0"), "the rows are generation 0's")
	require.Equal(t, 2, rotatetest.Count(t, db, prefix+"outgoing_g0"))
	require.Equal(t, 3, rotatetest.Count(t, db, prefix+"body"), "and read through the view")
	require.Equal(t, []string{"current", "empty", "empty"}, rotatetest.GenStates(t, db, prefix))
	var gens []int
	require.NoError(t, db.NewRaw("SELECT body_gen FROM ?", bun.Ident(prefix+"incoming")).Scan(ctx, &gens))
	require.Equal(t, []int{0}, gens, "the incoming message's body is in generation 0")

	rotatetest.UpgradedGoesOn(t, db, d, d, prefix, rotateParams)
	require.NoError(t, d.SchemaDrop(ctx, &dialect.SchemaDropParams{}))
	var left []string
	require.NoError(t, db.NewRaw("SELECT name FROM sqlite_master WHERE name LIKE ?", prefix+"%").Scan(ctx, &left))
	require.Empty(t, left, "SchemaDrop drops the views, every generation's tables and the generations table")
}

// populate registers partitions partitions and writes perPartition
// messages of payload bytes to each, moved, in the current generation.
func populate(t *testing.T, db *bun.DB, d *sqliteDialect, queue string, partitions, perPartition, payload int) []int64 {
	t.Helper()
	ctx := t.Context()
	ids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: queue, Partitions: partitions}}})
	require.NoError(t, err)
	pids := ids[0]
	write(t, db, d, pids, perPartition, payload)
	return pids
}

// write writes n messages of payload bytes to each of pids and moves them.
func write(t *testing.T, db *bun.DB, d *sqliteDialect, pids []int64, n, payload int) {
	t.Helper()
	ctx := t.Context()
	var rows []dialect.MessageRow
	for i := range n {
		for _, pid := range pids {
			var id dialect.MessageID
			copy(id[:], fmt.Sprintf("%04d%06d%06d", pid, i, len(rows)))
			rows = append(rows, dialect.MessageRow{ID: id, PartitionID: pid, PayloadType: "order.created",
				Payload: []byte(strings.Repeat("x", payload)), Headers: []byte(`{"tenant":"acme"}`)})
		}
	}
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, Rows: rows, ChunkRows: 500, ChunkBytes: 4 << 20}))
	for _, pid := range pids {
		_, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: n + 1})
		require.NoError(t, err)
	}
}

// TestRotateSizeEstimate: the size State reads (genSize) stays within a
// quarter of the bytes dbstat counts in the generation's b-trees, for small
// messages and for larger ones. dbstat is in modernc's build of SQLite,
// not in mattn's; the test skips without it.
func TestRotateSizeEstimate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		messages, length int
	}{
		{"small", 20_000, 16},
		{"1KiB", 5_000, 1024},
		{"6KiB", 1_000, 6 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, d, prefix := openRotating(t)
			if err := db.NewRaw("SELECT 1 FROM dbstat LIMIT 1").Scan(ctx, new(int)); err != nil {
				t.Skipf("no dbstat in this build of SQLite: %v", err)
			}
			require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
			populate(t, db, d, "q", 8, tc.messages/8, tc.length)
			rows, _, err := d.rotation().State(ctx, time.Hour)
			require.NoError(t, err)
			var exact int64
			require.NoError(t, db.NewRaw(`SELECT SUM(s.pgsize) FROM sqlite_master m JOIN dbstat s ON s.name = m.name
WHERE m.tbl_name IN (?, ?)`, prefix+"body_g0", prefix+"outgoing_g0").Scan(ctx, &exact))
			ratio := float64(rows[0].Size) / float64(exact)
			t.Logf("%d messages of %d bytes: estimate %d, dbstat %d bytes (%.2f)", tc.messages, tc.length, rows[0].Size, exact, ratio)
			require.InDelta(t, 1, ratio, 0.25)
			for g := 1; g < kit.Generations; g++ {
				require.Positive(t, rows[g].Size, "an empty generation takes its root pages")
			}
		})
	}
}

// TestPlansSearchEveryGeneration runs EXPLAIN QUERY PLAN on every statement
// that reads a generation's table, on generations of 16 partitions of 500
// messages in generation 0 and 10 in generation 1, and fails on a SCAN of
// one (a read of every row) but where the statement means to read rows
// without a key (allowed below, with why). The plans are logged (-v).
func TestPlansSearchEveryGeneration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := openRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pids := populate(t, db, d, "q", 16, 500, 64)
	_, err := db.NewRaw("UPDATE ? SET processed_seq = 400", bun.Ident(prefix+"processor")).Exec(ctx)
	require.NoError(t, err)
	res, err := d.TableRotate(ctx, rotateParams)
	require.NoError(t, err)
	require.True(t, res.Switched)
	write(t, db, d, pids, 10, 64)
	// And some incoming rows not moved, in generation 1.
	var rows []dialect.MessageRow
	for i, pid := range pids {
		rows = append(rows, dialect.MessageRow{ID: dialect.MessageID{0xff, byte(i)}, PartitionID: pid, PayloadType: "t", Payload: []byte("p")})
	}
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, Rows: rows, ChunkRows: 500, ChunkBytes: 4 << 20}))

	allowed := map[string]string{
		// ORDER BY rowid DESC LIMIT 64: the last 64 rows, not a scan.
		"rotations.RotateSQL.State": "the size sample reads the last 64 bodies by rowid",
		// NOT EXISTS (SELECT 1 FROM t): the first row answers.
		"rotations.RotateSQL.Empty": "reads at most the first row of each table",
		// No WHERE: the truncation, which visits no row.
		"rotations.DeleteOutgoing": "the truncation",
		"rotations.DeleteBody":     "the truncation",
	}
	body, outgoing := prefix+"body_g", prefix+"outgoing_g"
	gen := schema.NewQueryGen(sqlitedialect.New())
	checked := 0
	for _, c := range d.Statements() {
		reads := strings.Contains(c.Text, body) || strings.Contains(c.Text, outgoing) ||
			strings.Contains(c.Text, "?body") || strings.Contains(c.Text, "?outgoing")
		if !reads || strings.HasPrefix(c.Text, "INSERT") {
			continue
		}
		args := kit.Args{}
		for _, n := range c.Names {
			args[n] = planArg(c.Name, n, pids, prefix)
		}
		text, err := d.Render(gen, c.Stmt, args)
		require.NoError(t, err, c.Name)
		var plan []struct {
			ID     int    `bun:"id"`
			Parent int    `bun:"parent"`
			Unused int    `bun:"notused"`
			Detail string `bun:"detail"`
		}
		require.NoError(t, db.NewRaw("EXPLAIN QUERY PLAN "+text).Scan(ctx, &plan), c.Name)
		var lines []string
		for _, p := range plan {
			lines = append(lines, p.Detail)
			scan := strings.HasPrefix(p.Detail, "SCAN "+body) || strings.HasPrefix(p.Detail, "SCAN "+outgoing)
			if _, ok := allowed[c.Name]; scan && !ok {
				t.Errorf("%s scans a generation: %s", c.Name, p.Detail)
			}
		}
		t.Logf("%s:\n\t%s", c.Name, strings.Join(lines, "\n\t"))
		checked++
	}
	require.Greater(t, checked, 20)
}

// planArg is a value of ?name for statement stmt in
// TestPlansSearchEveryGeneration.
func planArg(stmt, name string, pids []int64, prefix string) any {
	bodies := bun.List([][]byte{{0x30, 0x30}, {0x30, 0x31}})
	switch name {
	case "pid":
		return pids[3]
	case "pids":
		if stmt == "MoveSQL.SelectHeads" {
			return kit.JSONArray(pids[:4])
		}
		return bun.List(pids[:4])
	case "ids":
		if strings.HasPrefix(stmt, "PurgeSQL.DeleteIncoming") {
			return bun.List([]int64{11, 12})
		}
		return bodies
	case "seqs":
		return bun.List([]int64{401, 402})
	case "after", "from":
		return int64(400)
	case "to", "upto":
		return int64(450)
	case "limit", "largest_batch":
		return 100
	case "offset":
		return 99
	case "headers":
		return `{"tenant":"acme"}`
	case "queue":
		return "q"
	case "payload":
		return []byte{}
	case "gen":
		return 0
	case "body":
		return kit.GenTable(prefix+"body", 0)
	case "outgoing":
		return kit.GenTable(prefix+"outgoing", 0)
	case "interval_us", "hold_us":
		return int64(30_000_000)
	case "owner":
		return "host-1"
	case "lease_us":
		return int64(30_000_000)
	}
	panic("no plan value for ?" + name + " of " + stmt)
}

// TestRotateSwitchAllOrNothing: see rotatetest.SwitchAllOrNothing.
func TestRotateSwitchAllOrNothing(t *testing.T) {
	t.Parallel()
	db, d, prefix := openRotating(t)
	require.NoError(t, d.SchemaMigrate(t.Context(), &dialect.SchemaMigrateParams{}))
	rotatetest.SwitchAllOrNothing(t, db, prefix, func(from, to int) (sql.Result, error) {
		return d.Exec(t.Context(), db, rotateSQL.Switch, kit.Args{"from": from, "to": to})
	})
}
