package kit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// Query runs s on conn and scans its rows into dest as bun does.
func (r *Runner) Query(ctx context.Context, conn bun.IConn, s *Stmt, args Args, dest ...any) error {
	q, err := r.query(ctx, conn, s, args)
	if err != nil {
		return r.Wrap(err)
	}
	return r.Wrap(q.Scan(ctx, dest...))
}

// Exec runs s on conn.
func (r *Runner) Exec(ctx context.Context, conn bun.IConn, s *Stmt, args Args) (sql.Result, error) {
	if c, ok := r.stmts[s]; ok && c.pieces != nil {
		return r.execPieces(ctx, conn, c, args)
	}
	q, err := r.query(ctx, conn, s, args)
	if err != nil {
		return nil, r.Wrap(err)
	}
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
func (r *Runner) query(ctx context.Context, conn bun.IConn, s *Stmt, args Args) (*bun.RawQuery, error) {
	c, ok := r.stmts[s]
	if !ok {
		return nil, errors.New("seqbox: a statement not among the dialect's sets")
	}
	if c.pieces != nil {
		return nil, fmt.Errorf("seqbox: statement %s is written in pieces: run it with Exec", c.name)
	}
	if err := c.check(args); err != nil {
		return nil, err
	}
	var stmt *sql.Stmt
	if s.Mode == Prepared {
		var err error
		if stmt, err = r.prepared(ctx, conn, c); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", c.name, err)
		}
	}
	if stmt == nil {
		return r.inlined(conn, c, args), nil
	}
	values := make([]any, len(c.params))
	for i, n := range c.params {
		values[i] = args[n]
		if len(c.bound) > 0 {
			if v, ok := r.cfg.Bound[n]; ok {
				values[i] = v
			}
		}
	}
	return r.bound(stmt, c.preparedText, values), nil
}

// inlined is c run on conn with args (checked) inlined by bun.
func (r *Runner) inlined(conn bun.IConn, c *compiled, args Args) *bun.RawQuery {
	return r.cfg.DB.NewRaw(c.text, r.withBound(c, c.inline(args))).Conn(conn)
}

// bound is the prepared stmt, of text, run with values: still a bun query,
// which passes a text without values on as it is.
func (r *Runner) bound(stmt *sql.Stmt, text string, values []any) *bun.RawQuery {
	return r.cfg.DB.NewRaw(text).Conn(stmtConn{stmt: stmt, values: values})
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

// inline is args as bun formats them: each list's items wrapped in the
// appender that renders them with the list's item text. Checked args only.
func (c *compiled) inline(args Args) Args {
	if c.lists == nil {
		return args
	}
	out := make(Args, len(args))
	for k, v := range args {
		if l, ok := c.lists[k]; ok {
			its, _ := items(v)
			v = listAppender{item: l.text, sep: l.sep, items: its}
		}
		out[k] = v
	}
	return out
}

// withBound is args with the dialect's bound values (Config.Bound) for a
// statement that names any, as bun inlines them.
func (r *Runner) withBound(c *compiled, args Args) schema.NamedArgAppender {
	if len(c.bound) == 0 {
		return args
	}
	return boundArgs{args: args, bound: r.cfg.Bound}
}

// boundArgs appends a call's value, or else the dialect's bound one.
type boundArgs struct{ args, bound Args }

func (b boundArgs) AppendNamedArg(gen schema.QueryGen, out []byte, name string) ([]byte, bool) {
	if _, ok := b.args[name]; ok {
		return b.args.AppendNamedArg(gen, out, name)
	}
	return b.bound.AppendNamedArg(gen, out, name)
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
