package kit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// Config is what a dialect hands to New: its properties, its statements
// and its database's ways (transactions, errors).
type Config struct {
	DB       *bun.DB
	Prefix   string
	Name     dialect.Name
	Features dialect.Feature
	Limits   dialect.Limits
	Tuning   dialect.Tuning
	// Sets are the dialect's statements: structs (or pointers to them)
	// whose *Stmt fields, nested structs included, are every statement it
	// runs. A nil field is an error from New.
	Sets []any
	// Schema is the dialect's migrations (LoadSchema).
	Schema Schema
	// NumberedParams: bound parameters are $1, $2, … (PostgreSQL), not ?.
	NumberedParams bool
	// TxOptions are the options of the outbox's own transactions.
	TxOptions *sql.TxOptions
	// BeginWrite, when set, runs first in every outbox transaction so that
	// it holds the write lock before it reads (SQLite).
	BeginWrite *Stmt
	// IsRetryable reports a conflict that may be retried at once;
	// IsDisconnect a connection that dropped or was killed.
	IsRetryable  func(error) bool
	IsDisconnect func(error) bool
}

// Runner runs a dialect's statements and provides its dialect.Base: the
// properties and the transaction discipline, no database operation.
type Runner struct {
	cfg    Config
	tables dialect.Tables
	words  map[string]string
	stmts  map[*Stmt]*compiled
	order  []*Stmt
	boot   []string
	migs   [][]string

	// writer serialises the outbox's own writes on single-writer databases:
	// concurrent writers in one process only make SQLite slower.
	writer sync.Mutex
}

// listItem is a List's item, compiled, and its separator.
type listItem struct {
	compiled
	sep string
}

// compiled is a statement with its table words substituted.
type compiled struct {
	name  string
	text  string
	names []string             // ?name values of text
	lists map[string]*listItem // by list name

	// Prepared statements: the text as prepared, where parameter i
	// carries the value params[i], and the statement prepared on the
	// database (nil until Prepare or a first use on the database).
	preparedText string
	params       []string
	mu           sync.Mutex
	stmt         *sql.Stmt
}

// New checks every statement of the dialect once, at construction: an
// unknown table word, a bare ?, a list in a prepared statement or a
// missing statement is an error here, never in the middle of the pipeline.
func New(cfg Config) (*Runner, error) {
	tables, err := dialect.NewTables(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, tables: tables, words: tableWords(tables), stmts: map[*Stmt]*compiled{}}
	named, err := Collect(cfg.Sets...)
	if err != nil {
		return nil, err
	}
	if cfg.BeginWrite != nil {
		named = append(named, NamedStmt{Name: "BeginWrite", Stmt: cfg.BeginWrite})
	}
	for _, n := range named {
		c, err := r.compile(n)
		if err != nil {
			return nil, fmt.Errorf("seqbox: %s statement %s: %w", cfg.Name, n.Name, err)
		}
		r.stmts[n.Stmt] = c
		r.order = append(r.order, n.Stmt)
	}
	if r.boot, r.migs, err = cfg.Schema.render(r.words); err != nil {
		return nil, err
	}
	return r, nil
}

func tableWords(t dialect.Tables) map[string]string {
	return map[string]string{
		"partitions":     t.Partitions,
		"body":           t.Body,
		"incoming":       t.Incoming,
		"outgoing":       t.Outgoing,
		"processor":      t.Processor,
		"vacuum_counter": t.VacuumCounter,
		"dead_letters":   t.DeadLetters,
		"dedup_keys":     t.DedupKeys,
		"schema_version": t.SchemaVersion,
	}
}

func (r *Runner) compile(n NamedStmt) (*compiled, error) {
	s := n.Stmt
	if s.Mode != Inlined && s.Mode != Prepared {
		return nil, errors.New("no mode: declare it with Inline or Prepare")
	}
	text, err := expand(s.Text, r.words)
	if err != nil {
		return nil, err
	}
	c := &compiled{name: n.Name, text: text, names: names(text)}
	if len(s.Lists) > 0 {
		if s.Mode == Prepared {
			return nil, errors.New("a prepared statement has a fixed shape: no lists")
		}
		c.lists = map[string]*listItem{}
		for _, l := range s.Lists {
			if !slices.Contains(c.names, l.Name) {
				return nil, fmt.Errorf("list ?%s is not in the text", l.Name)
			}
			item, err := expand(l.Item, r.words)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", l.Name, err)
			}
			c.lists[l.Name] = &listItem{compiled: compiled{name: n.Name + " ?" + l.Name, text: item, names: names(item)}, sep: l.Sep}
		}
	}
	if s.Mode == Prepared {
		c.preparedText, c.params = parameterize(text, r.cfg.NumberedParams)
	}
	return c, nil
}

// parameterize rewrites ?name values as the database's parameters: $n
// numbered once per name, or ? repeated per occurrence.
func parameterize(text string, numbered bool) (string, []string) {
	var params []string
	index := map[string]int{}
	out := namedValue.ReplaceAllStringFunc(text, func(m string) string {
		name := m[1:]
		if !numbered {
			params = append(params, name)
			return "?"
		}
		i, ok := index[name]
		if !ok {
			params = append(params, name)
			i = len(params)
			index[name] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return out, params
}

// NamedStmt is a statement and the name it has in its dialect's sets
// (Type.Field), for errors and golden files.
type NamedStmt struct {
	Name string
	Stmt *Stmt
}

// Collect lists the *Stmt fields of sets, in declaration order, nested
// structs included; a nil field is an error unless it is tagged
// `kit:"optional"` (a statement one shape of an operation needs).
func Collect(sets ...any) ([]NamedStmt, error) {
	var out []NamedStmt
	var walk func(prefix string, v reflect.Value) error
	walk = func(prefix string, v reflect.Value) error {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return fmt.Errorf("seqbox: statement set %s is nil", prefix)
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return fmt.Errorf("seqbox: statement set %s is a %s, not a struct", prefix, v.Kind())
		}
		t := v.Type()
		if prefix == "" {
			prefix = t.Name()
		}
		for i := range t.NumField() {
			f, name := v.Field(i), prefix+"."+t.Field(i).Name
			switch {
			case f.Type() == reflect.TypeFor[*Stmt]():
				if f.IsNil() {
					if t.Field(i).Tag.Get("kit") == "optional" {
						continue
					}
					return fmt.Errorf("seqbox: statement %s is missing", name)
				}
				out = append(out, NamedStmt{Name: name, Stmt: f.Interface().(*Stmt)})
			case f.Kind() == reflect.Struct || (f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct):
				if err := walk(name, f); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, s := range sets {
		if err := walk("", reflect.ValueOf(s)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Query runs s on conn and scans its rows into dest as bun does.
func (r *Runner) Query(ctx context.Context, conn bun.IConn, s *Stmt, args Args, dest ...any) error {
	q, done, err := r.query(ctx, conn, s, args)
	if err != nil {
		return r.Wrap(err)
	}
	defer done()
	return r.Wrap(q.Scan(ctx, dest...))
}

// Exec runs s on conn.
func (r *Runner) Exec(ctx context.Context, conn bun.IConn, s *Stmt, args Args) (sql.Result, error) {
	q, done, err := r.query(ctx, conn, s, args)
	if err != nil {
		return nil, r.Wrap(err)
	}
	defer done()
	res, err := q.Exec(ctx)
	return res, r.Wrap(err)
}

// Affected runs s on conn and returns how many rows it changed.
func (r *Runner) Affected(ctx context.Context, conn bun.IConn, s *Stmt, args Args) (int64, error) {
	res, err := r.Exec(ctx, conn, s, args)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return n, r.Wrap(err)
}

// query is one run of s as a bun query: a prepared statement too goes
// through bun, so that the database's query hooks (tracing, logging) see
// it and bun scans its rows.
func (r *Runner) query(ctx context.Context, conn bun.IConn, s *Stmt, args Args) (*bun.RawQuery, func(), error) {
	c, ok := r.stmts[s]
	if !ok {
		return nil, nil, errors.New("seqbox: a statement not among the dialect's sets")
	}
	if err := c.check(args); err != nil {
		return nil, nil, err
	}
	if s.Mode == Inlined {
		if c.lists == nil {
			return r.cfg.DB.NewRaw(c.text, args).Conn(conn), func() {}, nil
		}
		withLists := make(Args, len(args))
		for k, v := range args {
			if l, ok := c.lists[k]; ok {
				its, _ := items(v) // checked
				v = listAppender{item: l.text, sep: l.sep, items: its}
			}
			withLists[k] = v
		}
		return r.cfg.DB.NewRaw(c.text, withLists).Conn(conn), func() {}, nil
	}
	stmt, done, err := r.prepared(ctx, conn, c)
	if err != nil {
		return nil, nil, fmt.Errorf("prepare %s: %w", c.name, err)
	}
	values := make([]any, len(c.params))
	for i, n := range c.params {
		values[i] = args[n]
	}
	// Without values bun passes the text on as it is.
	return r.cfg.DB.NewRaw(c.preparedText).Conn(stmtConn{stmt: stmt, values: values}), done, nil
}

// check makes a wrong or missing value an error before anything runs:
// args must name exactly the statement's values, and a list's items
// exactly the item's.
func (c *compiled) check(args Args) error {
	if len(args) != len(c.names) {
		return c.mismatch(args)
	}
	for _, n := range c.names {
		v, ok := args[n]
		if !ok {
			return c.mismatch(args)
		}
		if l, isList := c.lists[n]; isList {
			its, ok := items(v)
			if !ok || len(its) == 0 {
				return fmt.Errorf("seqbox: statement %s: list ?%s needs at least one item, as []Item or []Args", c.name, n)
			}
			for i, it := range its {
				if _, isArgs := it.(Args); !isArgs && i > 0 {
					break // a row type reads the same names from every row
				}
				if err := l.checkItem(it); err != nil {
					return fmt.Errorf("seqbox: statement %s: list ?%s: %w", c.name, n, err)
				}
			}
		}
	}
	return nil
}

// checkItem checks a list item: Args exactly, another Item for every
// value its text names.
func (c *compiled) checkItem(it Item) error {
	if a, ok := it.(Args); ok {
		return c.check(a)
	}
	for _, n := range c.names {
		if _, ok := it.Value(n); !ok {
			return fmt.Errorf("seqbox: statement %s: an item has no ?%s", c.name, n)
		}
	}
	return nil
}

func (c *compiled) mismatch(args Args) error {
	var given []string
	for k := range args {
		given = append(given, k)
	}
	slices.Sort(given)
	return fmt.Errorf("seqbox: statement %s takes %v, given %v", c.name, c.names, given)
}

// listAppender renders a List's items, each formatted by bun with its own
// values.
type listAppender struct {
	item, sep string
	items     []Item
}

func (l listAppender) AppendQuery(gen schema.QueryGen, b []byte) ([]byte, error) {
	for i, it := range l.items {
		if i > 0 {
			b = append(b, l.sep...)
		}
		b = gen.AppendQuery(b, l.item, it)
	}
	return b, nil
}

// AppendNamedArg lets bun inline Args (schema.NamedArgAppender).
func (a Args) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	return AppendItem(a, gen, b, name)
}

// AppendItem appends it's value for ?name as bun inlines a value: an Item
// type's AppendNamedArg.
func AppendItem(it Item, gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	v, ok := it.Value(name)
	if !ok {
		return b, false
	}
	if qa, ok := v.(schema.QueryAppender); ok {
		out, err := qa.AppendQuery(gen, b)
		if err != nil {
			return b, false
		}
		return out, true
	}
	return gen.Append(b, v), true
}

// items reads a List's value: a []Item or a []Args.
func items(v any) ([]Item, bool) {
	switch v := v.(type) {
	case []Item:
		return v, true
	case []Args:
		out := make([]Item, len(v))
		for i := range v {
			out[i] = v[i]
		}
		return out, true
	}
	return nil, false
}

// stmtConn is one run of a prepared statement as a bun connection: it
// runs the statement with its bound values, whatever text bun hands it.
type stmtConn struct {
	stmt   *sql.Stmt
	values []any
}

func (s stmtConn) QueryContext(ctx context.Context, _ string, _ ...any) (*sql.Rows, error) {
	return s.stmt.QueryContext(ctx, s.values...)
}

func (s stmtConn) ExecContext(ctx context.Context, _ string, _ ...any) (sql.Result, error) {
	return s.stmt.ExecContext(ctx, s.values...)
}

func (s stmtConn) QueryRowContext(ctx context.Context, _ string, _ ...any) *sql.Row {
	return s.stmt.QueryRowContext(ctx, s.values...)
}

// prepared returns c prepared for conn. On the database it is prepared
// once and kept until Release. In a transaction, the statement prepared on
// the database is used on the transaction's connection (database/sql
// prepares it there once and keeps it); before the database has it, the
// statement is prepared on the transaction's own connection for this run:
// preparing on the database would take a second pooled connection, and a
// caller holding one in a transaction must not wait for another (with
// every connection held that way, the pool would deadlock). Prepare at
// start makes that path rare.
func (r *Runner) prepared(ctx context.Context, conn bun.IConn, c *compiled) (*sql.Stmt, func(), error) {
	noop := func() {}
	switch conn := conn.(type) {
	case *bun.DB:
		if conn != r.cfg.DB {
			return nil, nil, errors.New("a database other than the dialect's")
		}
		stmt, err := r.prepareOnDB(ctx, c)
		return stmt, noop, err
	case bun.Tx:
		c.mu.Lock()
		stmt := c.stmt
		c.mu.Unlock()
		if stmt != nil {
			return conn.Tx.StmtContext(ctx, stmt), noop, nil
		}
		s, err := conn.Tx.PrepareContext(ctx, c.preparedText)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	case bun.Conn:
		s, err := conn.Conn.PrepareContext(ctx, c.preparedText)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("a %T connection: prepared statements run on the dialect's database or its transactions", conn)
}

func (r *Runner) prepareOnDB(ctx context.Context, c *compiled) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmt != nil {
		return c.stmt, nil
	}
	stmt, err := r.cfg.DB.DB.PrepareContext(ctx, c.preparedText)
	if err != nil {
		return nil, err
	}
	c.stmt = stmt
	return stmt, nil
}

// Prepare prepares every prepared statement on the database now, while
// the caller holds no connection; see dialect.Base.
func (r *Runner) Prepare(ctx context.Context) error {
	for _, s := range r.order {
		if s.Mode != Prepared {
			continue
		}
		if _, err := r.prepareOnDB(ctx, r.stmts[s]); err != nil {
			return dialect.Wrap(r.Wrap(err), "prepare "+r.stmts[s].name)
		}
	}
	return nil
}

// Release closes every statement prepared on the database; see dialect.Base.
func (r *Runner) Release() error {
	var errs []error
	for _, s := range r.order {
		c := r.stmts[s]
		c.mu.Lock()
		if c.stmt != nil {
			errs = append(errs, c.stmt.Close())
			c.stmt = nil
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Statements lists the dialect's statements as compiled: name, mode and
// text with its table words substituted (golden files).
func (r *Runner) Statements() []Compiled {
	out := make([]Compiled, len(r.order))
	for i, s := range r.order {
		c := r.stmts[s]
		out[i] = Compiled{Name: c.name, Stmt: s, Text: c.text, PreparedText: c.preparedText, Params: c.params, Names: c.names}
		for name, l := range c.lists {
			if out[i].Lists == nil {
				out[i].Lists = map[string][]string{}
			}
			out[i].Lists[name] = l.names
		}
	}
	return out
}

// Render formats s with args as bun inlines them, for a golden file: the
// statement a reviewer reads, values and all. args are checked as a run
// checks them.
func (r *Runner) Render(gen schema.QueryGen, s *Stmt, args Args) (string, error) {
	c, ok := r.stmts[s]
	if !ok {
		return "", errors.New("seqbox: a statement not among the dialect's sets")
	}
	if err := c.check(args); err != nil {
		return "", err
	}
	withLists := make(Args, len(args))
	for k, v := range args {
		if l, ok := c.lists[k]; ok {
			its, _ := items(v) // checked
			v = listAppender{item: l.text, sep: l.sep, items: its}
		}
		withLists[k] = v
	}
	return gen.FormatQuery(c.text, withLists), nil
}

// Compiled is one statement as the dialect runs it.
type Compiled struct {
	Name string
	Stmt *Stmt
	// Text has its table words substituted and its ?name values.
	Text string
	// PreparedText and Params: a prepared statement as sent to the
	// database, parameter i carrying the value Params[i].
	PreparedText string
	Params       []string
	// Names are its ?name values; Lists its lists' item values by name.
	Names []string
	Lists map[string][]string
}

// ---------------------------------------------------------------- dialect.Base

func (r *Runner) Name() dialect.Name         { return r.cfg.Name }
func (r *Runner) Features() dialect.Feature  { return r.cfg.Features }
func (r *Runner) Tables() dialect.Tables     { return r.tables }
func (r *Runner) Limits() dialect.Limits     { return r.cfg.Limits }
func (r *Runner) Tuning() dialect.Tuning     { return r.cfg.Tuning }
func (r *Runner) DB() *bun.DB                { return r.cfg.DB }
func (r *Runner) TxOptions() *sql.TxOptions  { return r.cfg.TxOptions }
func (r *Runner) SchemaStatements() []string { return flatten(r.boot, r.migs) }

// IsRetryable reports a transient conflict; see dialect.Base.
func (r *Runner) IsRetryable(err error) bool {
	return err != nil && (errors.Is(err, dialect.ErrRetryable) || r.cfg.IsRetryable(err))
}

// IsTransient reports a conflict or a lost connection; see dialect.Base.
func (r *Runner) IsTransient(err error) bool {
	return r.IsRetryable(err) || (err != nil && r.cfg.IsDisconnect(err))
}

// Wrap marks retryable errors so callers can match dialect.ErrRetryable.
func (r *Runner) Wrap(err error) error {
	if err == nil {
		return nil
	}
	if r.cfg.IsRetryable(err) && !errors.Is(err, dialect.ErrRetryable) {
		return fmt.Errorf("%w: %w", dialect.ErrRetryable, err)
	}
	return err
}

// LockWriter takes the single-writer lock when the database has one writer.
func (r *Runner) LockWriter() func() {
	if !r.cfg.Features.Has(dialect.SingleWriter) {
		return func() {}
	}
	r.writer.Lock()
	return r.writer.Unlock
}

// lockWriter takes the single-writer lock for a write made with ctx, and
// returns ctx marked as holding it; a chain that holds it already gets
// dialect.ErrWriterHeld, as the lock would wait for itself.
func (r *Runner) lockWriter(ctx context.Context) (context.Context, func(), error) {
	if !r.cfg.Features.Has(dialect.SingleWriter) {
		return ctx, func() {}, nil
	}
	if dialect.WriterHeld(ctx, r.cfg.DB) {
		return ctx, nil, dialect.ErrWriterHeld
	}
	unlock := r.LockWriter()
	ctx, release := dialect.HoldWriter(ctx, r.cfg.DB)
	return ctx, func() { release(); unlock() }, nil
}

// RunInTx runs fn in an outbox transaction; see dialect.Base.
func (r *Runner) RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	ctx, unlock, err := r.lockWriter(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	err = r.cfg.DB.RunInTx(ctx, r.cfg.TxOptions, func(ctx context.Context, tx bun.Tx) error {
		if r.cfg.BeginWrite != nil {
			if _, err := r.Exec(ctx, tx, r.cfg.BeginWrite, nil); err != nil {
				return err
			}
		}
		return fn(ctx, tx)
	})
	return r.Wrap(err)
}

// Write runs a single autocommit write on the database, through the writer.
func (r *Runner) Write(ctx context.Context, s *Stmt, args Args) (sql.Result, error) {
	ctx, unlock, err := r.lockWriter(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return r.Exec(ctx, r.cfg.DB, s, args)
}
