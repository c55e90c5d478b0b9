// Package sqlite is the seqbox dialect for SQLite 3.35+ (modernc or mattn
// through bun's sqliteshim). SQLite has one writer: seqbox routes its own
// writes through one in-process writer and supports one process per
// database file. Open the database in WAL mode with a busy timeout; see
// [DSN].
//
// Every statement the dialect runs is written out whole in this package,
// in the file of its area (schema.go, queues.go, enqueue.go, dedup.go,
// sequencer.go, processor.go, deadletters.go, purge.go, vacuum.go,
// stats.go, rotate.go; shared pieces in generations.go), and rendered in
// testdata/sql/sqlite.sql. Times are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC
// from strftime('%Y-%m-%d %H:%M:%f', …), so that lease and retry
// comparisons are plain string comparisons.
package sqlite

import (
	"embed"
	"sync"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// sqliteDialect is the SQLite implementation of dialect.Dialect. It has no
// one-transaction ack-and-lease (engine.AckLeaser) and no group leases
// (engine.GroupLeaser): with one writer, the ack and the next lease take
// it in separate turns and the batch is read outside it, which drains
// faster than one transaction holding the writer through the read
// (BENCHMARKS.md, "Figures behind design choices", "SQLite: ack, then lease").
type sqliteDialect struct {
	*kit.Runner
	migrations int            // how many migrations this release has (schema.go)
	gens       kit.GenCache   // the generation new messages go to (rotate.go)
	stall      kit.StallWatch // whether a pinned generation drains (rotate.go)
	rotating   sync.Mutex     // the rotator's turn (rotate.go)
}

var _ dialect.Dialect = (*sqliteDialect)(nil)

// DSN returns the connection string seqbox expects for a database file:
// WAL, a busy timeout and immediate transactions, spelled for the driver
// that sqliteshim picked ("sqlite" is modernc, "sqlite3" is mattn; the two
// ignore each other's keys).
func DSN(driverName, path string) string {
	if driverName == "sqlite3" {
		return "file:" + path + "?_busy_timeout=10000&_journal_mode=WAL&_txlock=immediate&_synchronous=NORMAL"
	}
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// beginWrite is a no-op write that takes the write lock first, run at the
// start of every outbox transaction: a deferred transaction that reads and
// then writes fails with SQLITE_BUSY (no busy wait) when another
// connection committed in between. It touches this prefix's own version
// table, so it never waits on another prefix's tables.
var beginWrite = kit.Inline(`UPDATE {schema_version} SET version = version WHERE 0`)

// New returns the dialect for db with tables named prefix+name.
func New(db *bun.DB, prefix string) (dialect.Dialect, error) {
	schema, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return nil, err
	}
	r, err := kit.New(kit.Config{
		DB: db, Prefix: prefix, Name: dialect.SQLite, Features: dialect.SingleWriter,
		Limits: dialect.Limits{MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20},
		Tuning: dialect.Tuning{SequencerWorkers: 1, VacuumWorkers: 1},
		Sets: []any{&schemaSQL, &migrationLock, &registerSQL, &insertSQL, &enqueueSQL, &dedupSQL,
			&moveSQL, &sequencerSQL, &processorSQL, &leaseSQL, &deadLetterSQL, &purgeSQL,
			&vacuumSQL, &vacuumCounterSQL, &statsSQL, &rotateSQL},
		Schema:       schema,
		BeginWrite:   beginWrite,
		IsRetryable:  isRetryable,
		IsDisconnect: isDisconnect,
	})
	if err != nil {
		return nil, err
	}
	return &sqliteDialect{Runner: r, migrations: len(schema.Migrations)}, nil
}
