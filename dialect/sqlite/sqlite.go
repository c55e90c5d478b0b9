// Package sqlite is the seqbox dialect for SQLite 3.35+ (modernc or mattn
// through bun's sqliteshim). SQLite has one writer: seqbox routes its own
// writes through one in-process writer and supports one process per
// database file. Open the database in WAL mode with a busy timeout; see
// [DSN].
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// Dialect is the SQLite implementation of dialect.Dialect.
type Dialect struct {
	*sqlcore.Core
}

var _ dialect.Dialect = (*Dialect)(nil)

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

// New returns the dialect for db with tables named prefix+name.
func New(db *bun.DB, prefix string) (*Dialect, error) {
	cfg, err := config(db, prefix)
	if err != nil {
		return nil, err
	}
	core, err := sqlcore.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Dialect{Core: core}, nil
}

// SchemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func SchemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

// config is shared by New and SchemaStatements, so both validate the prefix
// and load the migrations the same way.
func config(db *bun.DB, prefix string) (sqlcore.Config, error) {
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return sqlcore.Config{}, err
	}
	tables, err := dialect.NewTables(prefix)
	if err != nil {
		return sqlcore.Config{}, err
	}
	return sqlcore.Config{
		DB: db, Prefix: prefix, Flavor: flavor{beginWrite: "UPDATE " + tables.SchemaVersion + " SET version = version WHERE 0"},
		Bootstrap: boot, Migrations: migs,
		MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20,
	}, nil
}

type flavor struct {
	beginWrite string
}

const timeFormat = "'%Y-%m-%d %H:%M:%f'"

func (flavor) Name() dialect.Name        { return dialect.SQLite }
func (flavor) Features() dialect.Feature { return dialect.SingleWriter }
func (flavor) Now() string               { return "strftime(" + timeFormat + ", 'now')" }
func (flavor) NowPlus() string           { return "strftime(" + timeFormat + ", 'now', ?)" }
func (flavor) NowPlusArg(d time.Duration) any {
	return fmt.Sprintf("%+.3f seconds", d.Seconds())
}
func (flavor) PartitionLock() string      { return "" }
func (flavor) SequencerReadSetup() string { return "" }
func (flavor) RowLock() string            { return "" }
func (flavor) InsertIgnore() string       { return "INSERT OR IGNORE" }
func (flavor) InsertIgnoreTail() string   { return "" }
func (flavor) TxOptions() *sql.TxOptions  { return nil }

// BeginWrite is a no-op write that takes the write lock first: a deferred
// transaction that reads and then writes fails with SQLITE_BUSY (no busy
// wait) when another connection committed in between.
func (f flavor) BeginWrite() string { return f.beginWrite }

// IsRetryable recognises SQLITE_BUSY and SQLITE_LOCKED without importing a
// driver: modernc's error has Code(), mattn's message names the code.
func (flavor) IsRetryable(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") ||
		strings.Contains(msg, "database table is locked")
}

// Lock opens an immediate transaction on the pinned connection: SQLite has
// no named locks, and the write lock serialises migrations across processes.
func (flavor) Lock(ctx context.Context, conn bun.Conn, _ string) (func(context.Context) error, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, "COMMIT")
		return err
	}, nil
}

// DeleteIncoming deletes by an id list: MVCC readers never wait on rows of
// open producers here.
func (flavor) DeleteIncoming() string { return "DELETE FROM {incoming} WHERE id IN (?)" }
func (flavor) IDList(ids []int64) any { return bun.List(ids) }
