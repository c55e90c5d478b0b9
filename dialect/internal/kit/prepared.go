package kit

import (
	"context"
	"database/sql"
	"errors"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

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

// prepared returns c prepared for conn, or nil where c runs inlined on
// conn. On the dialect's database it is prepared once and kept until
// Release. In a transaction of the dialect's sql.DB, the statement
// prepared on the database is used on the transaction's connection
// (database/sql prepares it there once and keeps it). Everything else runs
// inlined, in one round trip:
//   - a transaction before the database has the statement (Prepare at
//     start makes that rare): preparing on the database would take a second
//     pooled connection, and a caller holding one in a transaction must not
//     wait for another (with every connection held that way, the pool would
//     deadlock), and preparing on the transaction's connection for one run
//     costs two more round trips than inlining;
//   - a caller's transaction or connection of another pool (an enqueue in
//     the application's own transaction, say): a statement prepared on one
//     sql.DB cannot run on another's connections;
//   - a single connection (bun.Conn), which would prepare for one run too.
func (r *Runner) prepared(ctx context.Context, conn bun.IConn, c *compiled) (*sql.Stmt, error) {
	switch conn := conn.(type) {
	case *bun.DB:
		if conn.DB != r.cfg.DB.DB {
			return nil, nil
		}
		return r.prepareOnDB(ctx, c)
	case bun.Tx:
		if conn.NewRaw("").DB().DB != r.cfg.DB.DB {
			return nil, nil
		}
		c.mu.Lock()
		stmt := c.stmt
		c.mu.Unlock()
		if stmt == nil {
			return nil, nil
		}
		return conn.Tx.StmtContext(ctx, stmt), nil
	}
	return nil, nil
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
		for _, c := range r.stmts[s].prepareds() {
			if _, err := r.prepareOnDB(ctx, c); err != nil {
				return dialect.Wrap(r.Wrap(err), "prepare "+c.name)
			}
		}
	}
	return nil
}

// Release closes every statement prepared on the database; see dialect.Base.
func (r *Runner) Release() error {
	var errs []error
	for _, s := range r.order {
		for _, c := range r.stmts[s].prepareds() {
			c.mu.Lock()
			if c.stmt != nil {
				errs = append(errs, c.stmt.Close())
				c.stmt = nil
			}
			c.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}
