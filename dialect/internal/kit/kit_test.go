package kit

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

func newRunner(t *testing.T, numbered bool, sets ...any) (*Runner, error) {
	t.Helper()
	return New(Config{Prefix: "k_", Name: dialect.Postgres, Sets: sets, NumberedParams: numbered,
		Schema:      Schema{Bootstrap: "CREATE TABLE IF NOT EXISTS {schema_version} (version INT)", Migrations: []string{"SELECT 1"}},
		IsRetryable: func(error) bool { return false }, IsDisconnect: func(error) bool { return false }})
}

type testSet struct {
	Read   *Stmt
	Insert *Stmt
	Nested struct{ Lock *Stmt }
	Maybe  *Stmt `kit:"optional"`
	Other  int
}

func validSet() testSet {
	s := testSet{
		Read:   Prepare("SELECT a FROM {body} WHERE id = ?pid AND b = ?owner AND c = ?pid"),
		Insert: Inline("INSERT INTO {incoming} (x, y) VALUES ?rows", Rows("(?pid, ?id)")),
	}
	s.Nested.Lock = Inline("SELECT 1 FROM {processor} WHERE partition_id IN (?pids) FOR UPDATE")
	return s
}

func TestCollectNamesEveryStatement(t *testing.T) {
	t.Parallel()
	s := validSet()
	got, err := Collect(s)
	require.NoError(t, err)
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
	}
	require.Equal(t, []string{"testSet.Read", "testSet.Insert", "testSet.Nested.Lock"}, names, "nested sets are walked; an optional nil is left out")

	s.Insert = nil
	_, err = Collect(s)
	require.ErrorContains(t, err, "testSet.Insert is missing")
	_, err = Collect(42)
	require.Error(t, err)
}

func TestNewRefusesMalformedStatements(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stmt *Stmt
		want string
	}{
		"unknown table":  {Inline("SELECT 1 FROM {bodies}"), "unknown table word {bodies}"},
		"bare ?":         {Inline("SELECT 1 FROM {body} WHERE id = ? AND x = ?x"), "1 of its 2 ? are not ?name values"},
		"no mode":        {&Stmt{Text: "SELECT 1"}, "no mode"},
		"prepared lists": {&Stmt{Text: "INSERT INTO {body} VALUES ?rows ?more", Mode: Prepared, Lists: []List{Rows("(?a)"), {Name: "more", Item: "?b"}}}, "one list at most"},
		"__ in a piece":  {PrepareRows("INSERT INTO {body} VALUES ?rows", Rows("(?a__b)")), "may not contain __"},
		"list missing":   {Inline("INSERT INTO {body} VALUES (1)", Rows("(?a)")), "list ?rows is not in the text"},
		"bad list item":  {Inline("INSERT INTO {body} VALUES ?rows", Rows("(?, ?a)")), "list rows"},
	} {
		_, err := newRunner(t, true, struct{ S *Stmt }{tc.stmt})
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := New(Config{Prefix: "Bad"})
	require.ErrorIs(t, err, dialect.ErrInvalidPrefix)
}

func TestPreparedText(t *testing.T) {
	t.Parallel()
	s := validSet()
	for _, numbered := range []bool{true, false} {
		r, err := newRunner(t, numbered, s)
		require.NoError(t, err)
		c := r.Statements()[0]
		require.Equal(t, "testSet.Read", c.Name)
		if numbered {
			require.Equal(t, "SELECT a FROM k_body WHERE id = $1 AND b = $2 AND c = $1", c.PreparedText, "a repeated name is one parameter")
			require.Equal(t, []string{"pid", "owner"}, c.Params)
		} else {
			require.Equal(t, "SELECT a FROM k_body WHERE id = ? AND b = ? AND c = ?", c.PreparedText, "positional: a repeated name repeats its value")
			require.Equal(t, []string{"pid", "owner", "pid"}, c.Params)
		}
	}
}

func TestValuesAreChecked(t *testing.T) {
	t.Parallel()
	s := validSet()
	r, err := newRunner(t, true, s)
	require.NoError(t, err)
	gen := schema.NewQueryGen(pgdialect.New())

	_, err = r.Render(gen, s.Read, Args{"pid": 1})
	require.ErrorContains(t, err, "takes [pid owner], given [pid]", "a missing value")
	_, err = r.Render(gen, s.Read, Args{"pid": 1, "owner": "o", "ownr": "o"})
	require.ErrorContains(t, err, "given [owner ownr pid]", "a misspelled extra value")
	_, err = r.Render(gen, s.Insert, Args{"rows": []Args{}})
	require.ErrorContains(t, err, "at least one item", "an empty VALUES list is not SQL")
	_, err = r.Render(gen, s.Insert, Args{"rows": []Args{{"pid": 1}}})
	require.ErrorContains(t, err, "list ?rows", "an item's missing value")
	_, err = r.Render(gen, Inline("SELECT 1"), nil)
	require.ErrorContains(t, err, "not among the dialect's sets")

	got, err := r.Render(gen, s.Insert, Args{"rows": []Args{{"pid": 1, "id": []byte{0xab}}, {"pid": 2, "id": nil}}})
	require.NoError(t, err)
	require.Equal(t, `INSERT INTO k_incoming (x, y) VALUES (1, '\xab'), (2, NULL)`, got, "every value goes through bun")
	got, err = r.Render(gen, s.Nested.Lock, Args{"pids": bun.List([]int64{3, 4})})
	require.NoError(t, err)
	require.Equal(t, `SELECT 1 FROM k_processor WHERE partition_id IN (3, 4) FOR UPDATE`, got)
	got, err = r.Render(gen, s.Read, Args{"pid": 1, "owner": "it's"})
	require.NoError(t, err)
	require.Equal(t, `SELECT a FROM k_body WHERE id = 1 AND b = 'it''s' AND c = 1`, got, "a value cannot break out of its literal")
}

func TestSchemaRender(t *testing.T) {
	t.Parallel()
	s := Schema{Bootstrap: "CREATE {schema_version}\n", Migrations: []string{
		"A {body}\n-- seqbox:split\n  \n-- seqbox:split\nB {incoming}",
		"-- seqbox:split\nC {dead_letters}\n-- seqbox:split\n",
	}}
	got, err := s.Render("x_")
	require.NoError(t, err)
	require.Equal(t, []string{"CREATE x_schema_version", "A x_body", "B x_incoming", "C x_dead_letters"}, got)
	_, err = s.Render("Bad")
	require.ErrorIs(t, err, dialect.ErrInvalidPrefix)
	_, err = Schema{Bootstrap: "CREATE {nope}"}.Render("x_")
	require.ErrorContains(t, err, "unknown table word {nope}")
}

func TestLoadSchema(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"migration/002_second.sql":    {Data: []byte("two")},
		"migration/000_bootstrap.sql": {Data: []byte("boot")},
		"migration/001_init.sql":      {Data: []byte("one")},
		"migration/README.md":         {Data: []byte("not sql")},
	}
	s, err := LoadSchema(fsys)
	require.NoError(t, err)
	require.Equal(t, Schema{Bootstrap: "boot", Migrations: []string{"one", "two"}}, s, "numbered order, bootstrap apart")
	_, err = LoadSchema(fstest.MapFS{"migration/001_init.sql": {Data: []byte("one")}})
	require.Error(t, err, "no bootstrap")
	_, err = LoadSchema(fstest.MapFS{"migration/000_bootstrap.sql": {Data: []byte("boot")}})
	require.Error(t, err, "no migration")
}

// TestBoundValues: a value the dialect binds (Config.Bound) reaches every
// statement that names it, inlined or prepared, without the call giving
// it; a call that gives it anyway, or a list item that names it, is an
// error.
func TestBoundValues(t *testing.T) {
	t.Parallel()
	s := struct {
		Inlined  *Stmt
		Prepared *Stmt
		Plain    *Stmt
	}{
		Inline("SELECT 1 FROM {processor} WHERE partition_id = ?pid AND set_config('x', CAST(?mode AS text), true) IS NOT NULL"),
		Prepare("UPDATE {processor} SET a = ?a WHERE set_config('x', CAST(?mode AS text), true) IS NOT NULL AND b = ?a"),
		Inline("SELECT ?pid"),
	}
	newBound := func(bound Args, sets ...any) (*Runner, error) {
		return New(Config{Prefix: "k_", Name: dialect.Postgres, Sets: sets, NumberedParams: true, Bound: bound,
			Schema:      Schema{Bootstrap: "CREATE TABLE IF NOT EXISTS {schema_version} (version INT)", Migrations: []string{"SELECT 1"}},
			IsRetryable: func(error) bool { return false }, IsDisconnect: func(error) bool { return false }})
	}
	gen := schema.NewQueryGen(pgdialect.New())
	for _, mode := range []any{"off", nil} {
		r, err := newBound(Args{"mode": mode}, s)
		require.NoError(t, err)
		stmts := r.Statements()
		require.Equal(t, []string{"pid"}, stmts[0].Names, "a call gives only its own values")
		require.Equal(t, []string{"mode"}, stmts[0].Bound)
		require.Equal(t, []string{"a"}, stmts[1].Names)
		require.Equal(t, []string{"a", "mode"}, stmts[1].Params, "a bound value is a parameter of a prepared statement, bound at each run")
		require.Empty(t, stmts[2].Bound)

		got, err := r.Render(gen, s.Inlined, Args{"pid": 7})
		require.NoError(t, err)
		want := "'off'"
		if mode == nil {
			want = "NULL"
		}
		require.Equal(t, "SELECT 1 FROM k_processor WHERE partition_id = 7 AND set_config('x', CAST("+want+" AS text), true) IS NOT NULL", got)
		_, err = r.Render(gen, s.Inlined, Args{"pid": 7, "mode": "on"})
		require.ErrorContains(t, err, "takes [pid], given [mode pid]", "a call cannot override a bound value")
		got, err = r.Render(gen, s.Plain, Args{"pid": 7})
		require.NoError(t, err)
		require.Equal(t, "SELECT 7", got)
	}
	_, err := newBound(Args{"mode": "off"}, struct{ S *Stmt }{Inline("INSERT INTO {body} VALUES ?rows", Rows("(?pid, ?mode)"))})
	require.ErrorContains(t, err, "?mode is bound by the dialect")
}

func TestStallWatch(t *testing.T) {
	var w StallWatch
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	after := 10 * time.Second
	due, stuck := w.Due(0, t0, after)
	require.True(t, due)
	require.False(t, stuck)
	require.False(t, w.Look(0, t0, map[int64]int64{1: 5, 2: 7}), "a first look is never stuck")
	due, stuck = w.Due(0, t0.Add(after-time.Nanosecond), after)
	require.False(t, due)
	require.False(t, stuck)
	due, _ = w.Due(0, t0.Add(after), after)
	require.True(t, due)
	require.False(t, w.Look(0, t0.Add(after), map[int64]int64{1: 6, 3: 0}), "1 moved, 2 is done, 3 is new")
	require.True(t, w.Look(0, t0.Add(2*after), map[int64]int64{1: 9, 3: 0}), "3 has not moved")
	due, stuck = w.Due(0, t0.Add(2*after+time.Second), after)
	require.False(t, due)
	require.True(t, stuck, "the last verdict, until the next look")
	due, stuck = w.Due(1, t0.Add(2*after+time.Second), after)
	require.True(t, due, "another generation pinned")
	require.False(t, stuck)
	require.False(t, w.Look(1, t0.Add(2*after+time.Second), map[int64]int64{3: 0}), "a first look of generation 1")
	w.Reset()
	due, _ = w.Due(1, t0.Add(2*after+2*time.Second), after)
	require.True(t, due, "forgotten")
	require.False(t, w.Look(1, t0.Add(2*after+2*time.Second), nil), "nothing pending")
	require.False(t, w.Look(1, t0.Add(3*after+2*time.Second), map[int64]int64{3: 0}), "3 was not pending at the previous look")
}
