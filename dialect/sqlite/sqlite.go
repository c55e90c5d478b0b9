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
	"strings"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// sqliteDialect is the SQLite implementation of dialect.Dialect. It has no
// one-transaction ack-and-lease (processor.AckLeaser): with one writer,
// the ack and the next lease take it in separate turns and the batch is
// read outside it (drain 44-46k msgs/s this way, 35-36k combined).
type sqliteDialect struct {
	*sqlcore.Core
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

// New returns the dialect for db with tables named prefix+name.
func New(db *bun.DB, prefix string) (dialect.Dialect, error) {
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return nil, err
	}
	core, err := sqlcore.New(sqlcore.Config{
		DB: db, Prefix: prefix, Flavor: flavor{}, Bootstrap: boot, Migrations: migs,
		Limits: dialect.Limits{MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20},
		Tuning: dialect.Tuning{SequencerWorkers: 1, VacuumWorkers: 1},
	})
	if err != nil {
		return nil, err
	}
	return &sqliteDialect{Core: core}, nil
}

// schemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func schemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

// MessageInsertMany writes each chunk as two multi-row INSERTs.
func (d *sqliteDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return sqlcore.InsertChunks(ctx, p, d.InsertTwoStatements)
}

// SequenceMove moves one batch with several simple statements.
func (d *sqliteDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return d.SequenceMoveStatements(ctx, p)
}

// SequenceMoveMany moves several partitions in one transaction of five
// statements.
func (d *sqliteDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	return d.SequenceMoveManyStatements(ctx, p)
}

// ProcessorLease takes the lease with UPDATE … RETURNING through the
// writer, then reads the batch outside it.
func (d *sqliteDialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	unlock := d.LockWriter()
	state, ok, err := d.LeaseReturning(ctx, d.DB(), p)
	unlock()
	if err != nil || !ok {
		return dialect.ProcessorLeaseResult{}, err
	}
	return d.LeaseRead(ctx, d.DB(), p, state)
}

// ProcessorAck records an outcome in its own transaction.
func (d *sqliteDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return d.AckInTx(ctx, p)
}

// VacuumDelete deletes bodies, then outgoing rows, in one transaction: the
// reference measured DELETE … RETURNING plus an id list no faster at
// chunk 1,000, and an id list of 5,000 blobs is a 180 KB statement.
func (d *sqliteDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	return d.VacuumDeleteStatements(ctx, p)
}

// PartitionStats reads every partition's figures.
func (d *sqliteDialect) PartitionStats(ctx context.Context, _ *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	return d.PartitionStatsOn(ctx, d.DB())
}

type flavor struct{}

const timeFormat = "'%Y-%m-%d %H:%M:%f'"

func (flavor) Name() dialect.Name        { return dialect.SQLite }
func (flavor) Features() dialect.Feature { return dialect.SingleWriter }

func (flavor) Fragments() map[string]string {
	return map[string]string{
		"bigint_type":        "INTEGER",
		"async_commit":       "",
		"incoming_pending":   "1 = 1",
		"incoming_order":     "i.id",
		"now":                "strftime(" + timeFormat + ", 'now')",
		"insert_ignore":      "INSERT OR IGNORE",
		"insert_ignore_tail": "",
		"partition_lock":     "",
		"read_setup":         "",
		"row_lock":           "",
		"row_lock_wait":      "",
		"body_of_o":          "JOIN {body} b ON b.id = o.body_id",
		"body_of_i":          "JOIN {body} b ON b.id = i.body_id",
		"time_value":         "strftime(" + timeFormat + ", ?)",
		"message_id_type":    "BLOB",
		"table_exists":       "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
		// MVCC readers never wait on rows of open producers here.
		"delete_incoming": "DELETE FROM {incoming} WHERE id IN (?)",
		// json_each, not a JSON path: a header name needs no quoting.
		"header_match": "EXISTS (SELECT 1 FROM json_each(b.headers) h WHERE h.key = ? AND h.value = ?)",
		// Measured: an upsert with RETURNING plus a read of the rest ran
		// 2.8k one-message enqueues/s, an exec plus a read of every key
		// 4.2k (in-process calls; the write is what costs).
		"dedup_returning":       "",
		"dead_letter_returning": " RETURNING id, partition_id, seq",
		"dedup_holders":         "SELECT dedup_key, message_id FROM {dedup_keys} WHERE dedup_key IN (?) AND queue = ?",
		"dedup_upsert": "ON CONFLICT (queue, dedup_key) DO UPDATE SET message_id = excluded.message_id, " +
			"expires_at = excluded.expires_at WHERE {dedup_keys}.expires_at <= {now}",
		"dedup_expire": "DELETE FROM {dedup_keys} WHERE rowid IN (SELECT rowid FROM {dedup_keys} " +
			"WHERE expires_at <= {now} ORDER BY expires_at LIMIT ?)",
	}
}

func (flavor) NowPlus(placeholder string) string {
	return "strftime(" + timeFormat + ", 'now', (" + placeholder + " / 1000000.0) || ' seconds')"
}
func (flavor) TxOptions() *sql.TxOptions { return nil }

// BeginWrite is a no-op write that takes the write lock first: a deferred
// transaction that reads and then writes fails with SQLITE_BUSY (no busy
// wait) when another connection committed in between.
func (flavor) BeginWrite() string { return "UPDATE {schema_version} SET version = version WHERE 0" }

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

// IsDisconnect: an embedded database has no connection to lose.
func (flavor) IsDisconnect(error) bool { return false }

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

func (flavor) DeleteList(rows []sqlcore.MovedRow) any { return bun.List(sqlcore.IncomingIDs(rows)) }

func (flavor) DedupKeyList(keys [][]byte) any { return bun.List(keys) }

func (flavor) NumberedParams() bool { return false }
