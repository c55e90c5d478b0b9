package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// Args are the named values of a statement (?name in its text). Run bound
// (QueryBound, ExecBound) they travel as parameters; given to bun they are
// inlined like any value.
type Args map[string]any

// AppendNamedArg lets bun inline Args (schema.NamedArgAppender).
func (a Args) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	v, ok := a[name]
	if !ok {
		return b, false
	}
	return gen.AppendQuery(b, "?", v), true
}

// boundStmt is a statement prepared once on the database: the server plans
// (PostgreSQL) or parses (SQLite) it once per connection instead of on
// every call, and values travel as parameters instead of inlined text.
type boundStmt struct {
	stmt  *sql.Stmt
	text  string   // as prepared, for query hooks
	names []string // parameter i carries Args[names[i]]
}

// stmtConn is one run of a prepared statement as a bun connection: the
// statement goes through a bun query like any other, so the *bun.DB's
// query hooks (tracing, logging) see it, and bun scans its rows. It runs
// the statement with its bound values, whatever text bun hands it.
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

// namedParam matches ?name; the statements that run bound have no other ?.
var namedParam = regexp.MustCompile(`\?([a-z_]+)`)

// bound is the prepared form of an expanded statement, prepared on first
// use and kept until Release. It is nil, with no error, when
// the statement is not prepared yet and conn is not the dialect's database:
// preparing takes a second pooled connection, and a caller that holds one
// in a transaction must not wait for another (with every connection held
// by such a caller, the pool would deadlock). That caller runs the
// statement inline; the first caller without a transaction prepares it.
func (c *Core) bound(ctx context.Context, conn bun.IConn, stmt string) (*boundStmt, error) {
	if b, ok := c.prepared.Load(stmt); ok {
		return b.(*boundStmt), nil
	}
	if _, free := conn.(*bun.DB); !free {
		return nil, nil
	}
	expanded := c.SQL(stmt)
	if all, named := strings.Count(expanded, "?"), len(namedParam.FindAllString(expanded, -1)); all != named {
		// A bare ? would be bound to nothing (or to the wrong value).
		return nil, fmt.Errorf("statement has %d ? of which %d named: bound statements take ?name only", all, named)
	}
	var names []string
	index := map[string]int{}
	text := namedParam.ReplaceAllStringFunc(expanded, func(m string) string {
		name := m[1:]
		if c.flavor.NumberedParams() {
			i, ok := index[name]
			if !ok {
				names = append(names, name)
				i = len(names)
				index[name] = i
			}
			return "$" + strconv.Itoa(i)
		}
		names = append(names, name) // positional: a repeated name repeats its value
		return "?"
	})
	prepared, err := c.db.DB.PrepareContext(ctx, text)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	b := &boundStmt{stmt: prepared, text: text, names: names}
	if old, loaded := c.prepared.LoadOrStore(stmt, b); loaded {
		_ = prepared.Close() // another caller prepared it first
		return old.(*boundStmt), nil
	}
	return b, nil
}

// Release closes every statement prepared so far; see dialect.Base.
func (c *Core) Release() error {
	var errs []error
	c.prepared.Range(func(k, _ any) bool {
		if b, ok := c.prepared.LoadAndDelete(k); ok {
			errs = append(errs, b.(*boundStmt).stmt.Close())
		}
		return true
	})
	return errors.Join(errs...)
}

// on returns the statement for conn: the dialect's database, or a
// transaction of it (database/sql prepares it on the transaction's own
// connection); nil for any other connection, or no statement yet.
func (b *boundStmt) on(ctx context.Context, conn bun.IConn) *sql.Stmt {
	if b == nil {
		return nil
	}
	switch c := conn.(type) {
	case *bun.DB:
		return b.stmt
	case bun.Tx:
		return c.Tx.StmtContext(ctx, b.stmt)
	}
	return nil
}

func (b *boundStmt) values(args Args) ([]any, error) {
	out := make([]any, len(b.names))
	for i, n := range b.names {
		v, ok := args[n]
		if !ok {
			return nil, fmt.Errorf("bound statement: no value for ?%s", n)
		}
		out[i] = v
	}
	return out, nil
}

// QueryBound runs a statement with bound parameters on conn (the dialect's
// *bun.DB or a bun.Tx of it; any other connection gets the values inlined)
// and scans its rows into dest as bun would.
func (c *Core) QueryBound(ctx context.Context, conn bun.IConn, stmt string, args Args, dest ...any) error {
	b, err := c.bound(ctx, conn, stmt)
	if err != nil {
		return c.Wrap(err)
	}
	s := b.on(ctx, conn)
	if s == nil {
		return c.Wrap(c.Raw(conn, c.SQL(stmt), args).Scan(ctx, dest...))
	}
	values, err := b.values(args)
	if err != nil {
		return err
	}
	// Without values bun passes the text on as it is.
	return c.Wrap(c.db.NewRaw(b.text).Conn(stmtConn{stmt: s, values: values}).Scan(ctx, dest...))
}

// ExecBound runs a statement with bound parameters on conn; see QueryBound.
func (c *Core) ExecBound(ctx context.Context, conn bun.IConn, stmt string, args Args) (sql.Result, error) {
	b, err := c.bound(ctx, conn, stmt)
	if err != nil {
		return nil, c.Wrap(err)
	}
	s := b.on(ctx, conn)
	if s == nil {
		res, err := c.Raw(conn, c.SQL(stmt), args).Exec(ctx)
		return res, c.Wrap(err)
	}
	values, err := b.values(args)
	if err != nil {
		return nil, err
	}
	res, err := c.db.NewRaw(b.text).Conn(stmtConn{stmt: s, values: values}).Exec(ctx)
	return res, c.Wrap(err)
}

// Prepare is a no-op here: statements are prepared on first use.
func (c *Core) Prepare(context.Context) error { return nil }
