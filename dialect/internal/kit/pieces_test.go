package kit

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect"
)

func TestSplitPieces(t *testing.T) {
	t.Parallel()
	sizes := func(set []int, n int) []int {
		var out []int
		for _, k := range splitPieces(set, n) {
			out = append(out, set[k])
		}
		return out
	}
	def := pieceSizes()
	require.Empty(t, splitPieces(def, 0))
	require.Equal(t, []int{1}, sizes(def, 1))
	require.Equal(t, []int{64, 32, 4}, sizes(def, 100))
	require.Equal(t, []int{128, 128, 64, 8, 2}, sizes(def, 330))
	require.Equal(t, []int{64, 16, 16, 4}, sizes([]int{64, 16, 4, 1}, 100))
	for _, set := range [][]int{def, {64, 16, 4, 1}, {1}} {
		for n := range 600 {
			sum := 0
			for _, s := range sizes(set, n) {
				sum += s
			}
			require.Equal(t, n, sum, "%d items in pieces of %v", n, set)
		}
	}
}

func TestPreparedRowsText(t *testing.T) {
	t.Parallel()
	s := struct{ Insert *Stmt }{PrepareRows("INSERT INTO {incoming} (a, b, c) SELECT ?x UNION ALL VALUES ?rows", Rows("(?pid, ?id, ?pid)"))}
	for _, numbered := range []bool{true, false} {
		r, err := newRunner(t, numbered, s)
		require.NoError(t, err)
		p := r.stmts[s.Insert].pieces[6] // two rows
		if numbered {
			require.Equal(t, "INSERT INTO k_incoming (a, b, c) SELECT $1 UNION ALL VALUES ($2, $3, $2), ($4, $5, $4)", p.preparedText)
			require.Equal(t, []slot{{-1, "x"}, {0, "pid"}, {0, "id"}, {1, "pid"}, {1, "id"}}, p.slots)
		} else {
			require.Equal(t, "INSERT INTO k_incoming (a, b, c) SELECT ? UNION ALL VALUES (?, ?, ?), (?, ?, ?)", p.preparedText)
			require.Equal(t, []slot{{-1, "x"}, {0, "pid"}, {0, "id"}, {0, "pid"}, {1, "pid"}, {1, "id"}, {1, "pid"}}, p.slots)
		}
		require.Len(t, r.stmts[s.Insert].pieces, len(pieceSizes()))
		require.Equal(t, 128, strings.Count(r.stmts[s.Insert].pieces[0].preparedText, "), (")+1)
	}
}

// queryLog records the text of every statement bun runs.
type queryLog struct {
	mu    sync.Mutex
	texts []string
}

func (l *queryLog) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (l *queryLog) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.texts = append(l.texts, e.Query)
}

func (l *queryLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.texts
	l.texts = nil
	return out
}

// TestPreparedRowsRun writes lists of several lengths on an embedded
// SQLite database: prepared in pieces on the runner's database and in its
// transactions, one inlined statement on a connection of its own; every
// row is there, in the caller's order.
func TestPreparedRowsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := struct{ Insert *Stmt }{PrepareRows("INSERT INTO {incoming} (partition_id, body_id, tag) VALUES ?rows", Rows("(?pid, ?id, ?tag)"))}
	db, log, r := preparedRunner(t, "CREATE TABLE k_incoming (n INTEGER PRIMARY KEY AUTOINCREMENT, partition_id INTEGER, body_id BLOB, tag TEXT)", s)

	rows := func(n int, tag string) Args {
		list := make([]Args, n)
		for i := range list {
			list[i] = Args{"pid": int64(i), "id": []byte{byte(i), byte(i >> 8)}, "tag": fmt.Sprintf("%s-%d", tag, i)}
		}
		return Args{"rows": list}
	}
	check := func(tag string, n int) {
		t.Helper()
		var got []struct {
			PartitionID int64  `bun:"partition_id"`
			BodyID      []byte `bun:"body_id"`
			Tag         string `bun:"tag"`
		}
		require.NoError(t, db.NewRaw("SELECT partition_id, body_id, tag FROM k_incoming WHERE tag LIKE ? ORDER BY n", tag+"-%").Scan(ctx, &got))
		require.Len(t, got, n, tag)
		for i, g := range got {
			require.Equal(t, int64(i), g.PartitionID, tag)
			require.Equal(t, []byte{byte(i), byte(i >> 8)}, g.BodyID, tag)
			require.Equal(t, fmt.Sprintf("%s-%d", tag, i), g.Tag, tag)
		}
		log.take() // the check's own read
	}
	placeholders := func(texts []string) []int {
		out := make([]int, len(texts))
		for i, q := range texts {
			require.NotContains(t, q, "'", "a prepared piece carries no value in its text")
			out[i] = strings.Count(q, "(?")
		}
		return out
	}

	for _, n := range []int{1, 3, 100, 300} {
		tag := fmt.Sprintf("db%d", n)
		res, err := r.Exec(ctx, db, s.Insert, rows(n, tag))
		require.NoError(t, err)
		affected, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(n), affected)
		var want []int
		for _, k := range splitPieces(pieceSizes(), n) {
			want = append(want, pieceSizes()[k])
		}
		require.Equal(t, want, placeholders(log.take()), "%d rows: one prepared statement per piece", n)
		check(tag, n)
	}

	require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := r.Exec(ctx, tx, s.Insert, rows(37, "tx"))
		return err
	}))
	texts := log.take()
	require.Equal(t, []int{32, 4, 1}, placeholders(texts[1:len(texts)-1]), "prepared in the transaction too (BEGIN and COMMIT around)")
	check("tx", 37)

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	_, err = r.Exec(ctx, conn, s.Insert, rows(37, "conn"))
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	texts = log.take()
	require.Len(t, texts, 1, "a connection of its own: one inlined statement")
	require.Contains(t, texts[0], "'conn-36'")
	check("conn", 37)

	_, err = r.Exec(ctx, db, s.Insert, Args{"rows": []Args{{"pid": 1, "id": nil}}})
	require.ErrorContains(t, err, "list ?rows", "an item's missing value is an error before anything runs")
	require.Empty(t, log.take())
	require.ErrorContains(t, r.Query(ctx, db, s.Insert, rows(2, "q"), new([]int64)), "run it with Exec")
}

// TestPreparedCountsRun: a statement prepared for exact counts runs a
// list of one of them as one prepared statement, in the database and in a
// transaction, and a list of any other count as one inlined statement;
// every row is there, in order.
func TestPreparedCountsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := struct{ Insert *Stmt }{PrepareCounts("INSERT INTO {incoming} (partition_id, tag) VALUES ?rows", Rows("(?pid, ?tag)"), 10, 1, 10)}
	db, log, r := preparedRunner(t, "CREATE TABLE k_incoming (n INTEGER PRIMARY KEY AUTOINCREMENT, partition_id INTEGER, tag TEXT)", s)
	require.Len(t, r.stmts[s.Insert].pieces, 2, "one statement per distinct count")

	write := func(conn bun.IConn, n int, tag string) {
		t.Helper()
		list := make([]Args, n)
		for i := range list {
			list[i] = Args{"pid": int64(i), "tag": fmt.Sprintf("%s-%d", tag, i)}
		}
		res, err := r.Exec(ctx, conn, s.Insert, Args{"rows": list})
		require.NoError(t, err)
		affected, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(n), affected)
	}
	check := func(tag string, n int) {
		t.Helper()
		var got []string
		require.NoError(t, db.NewRaw("SELECT tag FROM k_incoming WHERE tag LIKE ? ORDER BY n", tag+"-%").Scan(ctx, &got))
		require.Len(t, got, n, tag)
		for i, g := range got {
			require.Equal(t, fmt.Sprintf("%s-%d", tag, i), g)
		}
		log.take()
	}
	for _, c := range []struct {
		n        int
		prepared bool
	}{{1, true}, {10, true}, {2, false}, {11, false}, {100, false}} {
		tag := fmt.Sprintf("db%d", c.n)
		write(db, c.n, tag)
		texts := log.take()
		require.Len(t, texts, 1, "%d rows: one statement", c.n)
		if c.prepared {
			require.NotContains(t, texts[0], "'", "%d rows: prepared, no value in the text", c.n)
			require.Equal(t, c.n, strings.Count(texts[0], "(?"))
		} else {
			require.Contains(t, texts[0], fmt.Sprintf("'%s-%d'", tag, c.n-1), "%d rows: inlined", c.n)
		}
		check(tag, c.n)
	}
	require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		write(tx, 10, "tx")
		return nil
	}))
	texts := log.take()
	require.Len(t, texts, 3, "BEGIN, the statement, COMMIT")
	require.NotContains(t, texts[1], "'", "prepared in the transaction too")
	check("tx", 10)

	_, err := New(Config{DB: db, Prefix: "k_", Name: dialect.SQLite, Sets: []any{struct{ Bad *Stmt }{PrepareCounts("INSERT INTO {incoming} (tag) VALUES ?rows", Rows("(?tag)"), 0)}},
		Schema: Schema{Bootstrap: "SELECT 1", Migrations: []string{"SELECT 1"}}})
	require.ErrorContains(t, err, "at least 1", "a count below 1 is refused when the dialect is built")
}

// preparedRunner is a runner of set's statements (prefix k_) on a fresh
// embedded SQLite database made by ddl, its statements prepared, and the
// log of the statements it runs from now.
func preparedRunner(t *testing.T, ddl string, set any) (*bun.DB, *queryLog, *Runner) {
	t.Helper()
	ctx := context.Background()
	sqldb, err := sql.Open(sqliteshim.ShimName, "file:"+t.TempDir()+"/k.db")
	require.NoError(t, err)
	log := &queryLog{}
	db := bun.NewDB(sqldb, sqlitedialect.New()).WithQueryHook(log)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.ExecContext(ctx, ddl)
	require.NoError(t, err)
	r, err := New(Config{DB: db, Prefix: "k_", Name: dialect.SQLite, Sets: []any{set},
		Schema:      Schema{Bootstrap: "SELECT 1", Migrations: []string{"SELECT 1"}},
		IsRetryable: func(error) bool { return false }, IsDisconnect: func(error) bool { return false }})
	require.NoError(t, err)
	require.NoError(t, r.Prepare(ctx))
	t.Cleanup(func() { _ = r.Release() })
	log.take()
	return db, log, r
}

func TestGenStmt(t *testing.T) {
	t.Parallel()
	stmts := PerGeneration(func(g int) *Stmt { return Inline("SELECT " + strconv.Itoa(g)) })
	for g := range Generations {
		got, err := genStmt(stmts, int16(g))
		require.NoError(t, err)
		require.Same(t, stmts[g], got)
	}
	for _, g := range []int16{-1, Generations, 99} {
		_, err := genStmt(stmts, g)
		require.ErrorContains(t, err, "is not one of 0..2", "generation %d: an error, not an index out of range", g)
	}
}
