// Package postgres is the seqbox dialect for PostgreSQL 15 and later, with
// any driver bun supports (pgdriver, pgx stdlib, lib/pq). It imports none:
// listening for other processes' wake-ups goes through a Listener the
// application passes in (WithListener).
//
// Every statement the dialect runs is written out whole in this package,
// in the file of its area (schema.go, queues.go, enqueue.go, dedup.go,
// sequencer.go, processor.go, group.go, deadletters.go, purge.go,
// vacuum.go, stats.go, listen.go), as a field of a statement set; New
// hands every set to kit.New, which checks them all at construction
// (docs/ARCHITECTURE.md, "The SQL layer"). testdata/sql/postgres.sql shows
// each one as it is sent.
package postgres

import (
	"embed"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// pgDialect is the PostgreSQL implementation of dialect.Dialect. It writes
// several operations as single statements (data-modifying CTEs) where that
// measured faster, and implements engine.AckLeaser, engine.GroupLeaser,
// vacuum.TableVacuumer and the wake-ups (listen.go).
type pgDialect struct {
	*kit.Runner
	listen ListenFunc // nil: no wake-ups from other processes
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

// statementSets are every statement the dialect runs, by area.
var statementSets = []any{
	schemaSQL, migrateLockSQL,
	registerSQL,
	insertSQL, insertOneSQL, pendingSQL,
	dedupSQL,
	moveSQL, writeSQL,
	processorSQL, leaseSQL,
	groupSQL,
	deadLetterSQL,
	purgeSQL,
	vacuumSQL,
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
	runner, err := kit.New(kit.Config{
		DB: db, Prefix: prefix, Name: dialect.Postgres, Features: dialect.MultiProcess,
		Limits: dialect.Limits{MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20},
		Tuning: dialect.Tuning{SequencerWorkers: 4, VacuumWorkers: 4},
		Sets:   statementSets, Schema: schema,
		NumberedParams: true,
		IsRetryable:    isRetryable, IsDisconnect: isDisconnect,
	})
	if err != nil {
		return nil, err
	}
	d := &pgDialect{Runner: runner}
	for i, opt := range opts {
		if opt.apply == nil {
			return nil, fmt.Errorf("seqbox: postgres.New: option %d is the zero Option", i)
		}
		if err := opt.apply(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}
