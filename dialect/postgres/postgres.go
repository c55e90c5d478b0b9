// Package postgres is the seqbox dialect for PostgreSQL 15 and later, with
// any driver bun supports (pgdriver, pgx stdlib, lib/pq). It imports none:
// listening for other processes' wake-ups goes through a Listener the
// application passes in (WithListener).
//
// Every statement the dialect runs is written out whole in this package,
// in the file of its area (schema.go, queues.go, enqueue.go, dedup.go,
// sequencer.go, processor.go, group.go, deadletters.go, purge.go,
// vacuum.go, rotate.go, stats.go, listen.go), as a field of a statement set; New
// hands every set to kit.New, which checks them all at construction
// (docs/ARCHITECTURE.md, "The SQL layer"). testdata/sql/postgres.sql shows
// each one as it is sent.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/configerr"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// pgDialect is the PostgreSQL implementation of dialect.Dialect. It writes
// several operations as single statements (data-modifying CTEs) where that
// measured faster, and implements engine.AckLeaser, engine.GroupLeaser,
// vacuum.TableVacuumer, vacuum.Rotator (rotate.go) and the wake-ups
// (listen.go).
type pgDialect struct {
	*kit.Runner
	listen ListenFunc        // nil: no wake-ups from other processes
	commit SynchronousCommit // seqbox's own transactions' synchronous_commit
	gens   kit.GenCache      // the generation new messages go to (rotate.go)
	stall  kit.StallWatch    // whether a pinned generation drains (rotate.go)
	// onRotate is a test's hook into a truncation (rotateHook); nil.
	onRotate func(ctx context.Context, stage string, tx bun.Tx) error
}

var (
	_ dialect.Dialect        = (*pgDialect)(nil)
	_ dialect.WakeupListener = (*pgDialect)(nil)
	_ dialect.WakeupNotifier = (*pgDialect)(nil)
)

// Option configures the PostgreSQL dialect (seqbox.Builder.PostgresOptions).
type Option struct{ apply func(*pgDialect) error }

// WithListener makes the dialect listen for other processes' wake-ups
// (docs/ARCHITECTURE.md, "Wake-ups across processes") on the connections
// listen opens. Without it, other processes' work is found by polling.
func WithListener(listen ListenFunc) Option {
	return Option{func(d *pgDialect) error {
		if listen == nil {
			return errors.New("seqbox: postgres.WithListener: nil ListenFunc")
		}
		d.listen = listen
		return nil
	}}
}

// SynchronousCommit is the synchronous_commit setting that seqbox's own
// transactions take on PostgreSQL: its moves, leases, acks and prunes, and
// the transaction a transactional handler runs in (docs/ARCHITECTURE.md,
// "Asynchronous commits"). The application's transactions, its enqueues
// included, keep their own. It decides what a server crash or a failover
// to a standby can undo of seqbox's bookkeeping (docs/FAILOVER.md).
type SynchronousCommit string

// The values of SynchronousCommit: PostgreSQL's own, and Inherit.
const (
	// SynchronousCommitOff: seqbox's commits wait neither for the local log
	// flush nor for a standby. The fastest when each commit carries few
	// messages. A crash or a failover can undo seqbox's last commits, which
	// it then redoes: no committed message is lost, but seqs already
	// delivered can be handed out again to other messages
	// (docs/FAILOVER.md).
	SynchronousCommitOff SynchronousCommit = "off"
	// SynchronousCommitLocal waits for the local flush, not for a standby.
	SynchronousCommitLocal SynchronousCommit = "local"
	// SynchronousCommitRemoteWrite waits for the synchronous standbys to
	// have written the commit (not flushed it).
	SynchronousCommitRemoteWrite SynchronousCommit = "remote_write"
	// SynchronousCommitOn waits for the local flush and, when
	// synchronous_standby_names names standbys, for them to flush it too:
	// nothing seqbox has committed is undone by a failover to one of them.
	SynchronousCommitOn SynchronousCommit = "on"
	// SynchronousCommitRemoteApply waits for the synchronous standbys to
	// have applied the commit, so that it is visible there.
	SynchronousCommitRemoteApply SynchronousCommit = "remote_apply"
	// SynchronousCommitInherit leaves the setting as the session has it:
	// the server's, database's or role's default, or the connection's
	// (options=-c synchronous_commit=… in a libpq-style DSN).
	SynchronousCommitInherit SynchronousCommit = "inherit"

	// SynchronousCommitDefault is SynchronousCommitOff.
	SynchronousCommitDefault = SynchronousCommitOff
)

// bound is the value bound to ?sync_commit in every statement that sets
// it: NULL for Inherit, which the statements read as the session's
// current setting.
func (s SynchronousCommit) bound() any {
	if s == SynchronousCommitInherit {
		return nil
	}
	return string(s)
}

// WithSynchronousCommit sets the synchronous_commit of seqbox's own
// transactions; "" is the default, SynchronousCommitDefault (off). Give
// SynchronousCommitOn (or Inherit, with a server whose default is on)
// where a failover to a synchronous standby must keep every seq a handler
// has seen (docs/FAILOVER.md). It changes no statement's text: the value
// is bound, and the statements set it in the transaction's first
// statement, at no extra round trip. Another value is a configuration
// error.
func WithSynchronousCommit(mode SynchronousCommit) Option {
	return Option{func(d *pgDialect) error {
		switch mode {
		case "":
			mode = SynchronousCommitDefault
		case SynchronousCommitOff, SynchronousCommitLocal, SynchronousCommitRemoteWrite,
			SynchronousCommitOn, SynchronousCommitRemoteApply, SynchronousCommitInherit:
		default:
			return configerr.New("PostgresOptions", "postgres.WithSynchronousCommit(%q): want off, local, remote_write, on, remote_apply or inherit", string(mode))
		}
		d.commit = mode
		return nil
	}}
}

// statementSets are every statement the dialect runs, by area.
var statementSets = []any{
	schemaSQL, migrateLockSQL,
	registerSQL,
	insertSQL, pendingSQL,
	dedupSQL,
	moveSQL, writeSQL,
	processorSQL, leaseSQL,
	groupSQL,
	deadLetterSQL,
	purgeSQL,
	vacuumSQL, rotateSQL,
	statsSQL, statsSettingsSQL,
	wakeupSQL,
}

// New returns the dialect for db with tables named prefix+name. It does
// not touch the database.
func New(db *bun.DB, prefix string, opts ...Option) (dialect.Dialect, error) {
	schema, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return nil, err
	}
	d := &pgDialect{commit: SynchronousCommitDefault}
	for i, opt := range opts {
		if opt.apply == nil {
			return nil, fmt.Errorf("seqbox: postgres.New: option %d is the zero Option", i)
		}
		if err := opt.apply(d); err != nil {
			return nil, err
		}
	}
	d.Runner, err = kit.New(kit.Config{
		DB: db, Prefix: prefix, Name: dialect.Postgres, Features: dialect.MultiProcess,
		Limits: dialect.Limits{MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20},
		Tuning: dialect.Tuning{SequencerWorkers: 2, VacuumWorkers: 4},
		Sets:   statementSets, Schema: schema,
		Bound:          kit.Args{"sync_commit": d.commit.bound()},
		NumberedParams: true,
		IsRetryable:    isRetryable, IsDisconnect: isDisconnect,
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}
