package kit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// The dialect.Base a Runner provides: properties and the transaction
// discipline, no database operation.

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
