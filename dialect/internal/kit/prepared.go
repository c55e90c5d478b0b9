package kit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
