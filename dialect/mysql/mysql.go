// Package mysql is the seqbox dialect for MySQL 8.0.4+ and MariaDB 10.6+
// (both have SKIP LOCKED and JSON_TABLE). Open the *bun.DB with mysqldialect and, for
// readable timestamps, parseTime=true; seqbox itself writes times as UTC.
package mysql

import (
	"context"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// ErrServerTooOld is returned by New for a server without SKIP LOCKED and JSON_TABLE.
var ErrServerTooOld = errors.New("seqbox: MySQL 8.0.4+ or MariaDB 10.6+ is required")

// mysqlDialect is the MySQL/MariaDB implementation of dialect.Dialect. It
// implements processor.AckLeaser with one READ COMMITTED transaction.
type mysqlDialect struct {
	*sqlcore.Core
}

var _ dialect.Dialect = (*mysqlDialect)(nil)

// New checks the server version and reads max_allowed_packet, which bounds
// the size of one statement (bun sends values inline, bytes as hex). If the
// server cannot be reached it fails at once; seqbox's Builder.Start calls
// it again until its context ends.
func New(ctx context.Context, db *bun.DB, prefix string) (dialect.Dialect, error) {
	var version string
	var packet int64
	if err := db.NewRaw("SELECT VERSION(), @@max_allowed_packet").Scan(ctx, &version, &packet); err != nil {
		return nil, readErr(err, "reading its version")
	}
	mariaDB, err := checkVersion(version)
	if err != nil {
		return nil, err
	}
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return nil, err
	}
	// When the connections already default to READ COMMITTED (DSN parameter
	// transaction_isolation, or tx_isolation on MariaDB), skip the extra
	// SET TRANSACTION round trip the driver sends before every BEGIN.
	variable := "@@transaction_isolation"
	if mariaDB {
		variable = "@@tx_isolation"
	}
	var isolation string
	if err := db.NewRaw("SELECT "+variable).Scan(ctx, &isolation); err != nil {
		return nil, readErr(err, "reading its isolation level")
	}
	// Leave room for the statement text around the hex-encoded values.
	maxStatement := int(packet) - 64<<10
	core, err := sqlcore.New(sqlcore.Config{
		DB: db, Prefix: prefix, Flavor: flavor{readCommitted: strings.EqualFold(isolation, "READ-COMMITTED")},
		Bootstrap: boot, Migrations: migs,
		Limits: dialect.Limits{MaxPayloadBytes: maxStatement/2 - 64<<10, MaxStatementBytes: maxStatement},
		Tuning: dialect.Tuning{SequencerWorkers: 2, VacuumWorkers: 4},
	})
	if err != nil {
		return nil, err
	}
	if err := core.Check(vacuumDeleteSQL, vacuumPrunedSQL); err != nil {
		return nil, err
	}
	return &mysqlDialect{Core: core}, nil
}

// readErr is a failed read of the server's settings in New. A server that
// cannot be reached says so, and is marked transient: Start waits for it
// (a server still starting), the admin entry points fail at once.
func readErr(err error, doing string) error {
	if (flavor{}).IsDisconnect(err) {
		return lifecycle.Transient(dialect.Wrap(err, "MySQL/MariaDB unreachable ("+doing+")"))
	}
	return dialect.Wrap(err, "MySQL/MariaDB: "+doing)
}

// schemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func schemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// checkVersion accepts MySQL >= 8.0.4 and MariaDB >= 10.6 (SKIP LOCKED, JSON_TABLE).
func checkVersion(v string) (mariaDB bool, err error) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return false, fmt.Errorf("%w: cannot parse version %q", ErrServerTooOld, v)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	mariaDB = strings.Contains(strings.ToLower(v), "mariadb")
	ok := false
	if mariaDB {
		ok = major > 10 || (major == 10 && minor >= 6)
	} else {
		ok = major > 8 || (major == 8 && (minor > 0 || patch >= 4))
	}
	if !ok {
		return mariaDB, fmt.Errorf("%w: server is %s", ErrServerTooOld, v)
	}
	return mariaDB, nil
}

// MessageInsertMany writes each chunk as two multi-row INSERTs.
func (d *mysqlDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return sqlcore.InsertChunks(ctx, p, d.InsertTwoStatements)
}

// SequenceMove moves one batch with several simple statements.
func (d *mysqlDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return d.SequenceMoveStatements(ctx, p)
}

// SequenceMoveMany moves several partitions in one transaction of five
// statements.
func (d *mysqlDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	return d.SequenceMoveManyStatements(ctx, p)
}

// ProcessorLease takes the lease with UPDATE then SELECT (MySQL has no
// UPDATE … RETURNING) in one READ COMMITTED transaction, then reads the batch.
func (d *mysqlDialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	var state dialect.ProcessorState
	var ok bool
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		state, ok, err = d.LeaseThenRead(ctx, tx, p)
		return err
	})
	if err != nil || !ok {
		return dialect.ProcessorLeaseResult{}, err
	}
	return d.LeaseRead(ctx, d.DB(), p, state)
}

// ProcessorAck records an outcome in its own transaction.
func (d *mysqlDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return d.AckInTx(ctx, p)
}

// ProcessorAckLease acks and re-leases in one transaction; see processor.AckLeaser.
func (d *mysqlDialect) ProcessorAckLease(ctx context.Context, p *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	return d.AckLeaseInTx(ctx, p, d.LeaseThenRead)
}

// ProcessorLeaseGroup takes several partitions' leases in one transaction;
// see processor.GroupLeaser.
func (d *mysqlDialect) ProcessorLeaseGroup(ctx context.Context, p *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error) {
	return d.LeaseGroupStatements(ctx, p)
}

// ProcessorAckLeaseGroup acks and re-leases several partitions in one
// transaction; see processor.GroupLeaser.
func (d *mysqlDialect) ProcessorAckLeaseGroup(ctx context.Context, p *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error) {
	return d.AckLeaseGroupStatements(ctx, p)
}

// The ranges, one JSON value [[pid,from,to],…], as a table.
const vacuumRanges = "JSON_TABLE(?, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r"

// vacuumDeleteSQL is a multi-table DELETE: the portable DELETE … WHERE id
// IN (SELECT …) scans the whole body table per chunk on MariaDB.
// STRAIGHT_JOIN reads the ranges, then outgoing by primary key, then bodies
// by primary key, so it never waits on the uncommitted body rows of open
// producers.
const vacuumDeleteSQL = "DELETE o, b FROM " + vacuumRanges + " STRAIGHT_JOIN {outgoing} o " +
	"ON o.partition_id = r.pid AND o.seq > r.lo AND o.seq <= r.hi STRAIGHT_JOIN {body} b ON b.id = o.body_id"

// vacuumPrunedSQL records every range as pruned (monotonic).
const vacuumPrunedSQL = "UPDATE " + vacuumRanges + " STRAIGHT_JOIN {vacuum_counter} v ON v.partition_id = r.pid " +
	"SET v.pruned_seq = r.hi WHERE v.pruned_seq < r.hi"

// VacuumDelete deletes every range in one statement and records them as
// pruned in a second, in one transaction.
func (d *mysqlDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	ranges := sqlcore.RangesJSON(p.Ranges)
	var n int64
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := d.Raw(tx, d.SQL(vacuumDeleteSQL), ranges).Exec(ctx)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = d.Raw(tx, d.SQL(vacuumPrunedSQL), ranges).Exec(ctx)
		return err
	})
	// Each message is one outgoing and one body row.
	return int(n / 2), err
}

// PartitionStats reads every partition's figures.
func (d *mysqlDialect) PartitionStats(ctx context.Context, _ *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	return d.PartitionStatsOn(ctx, d.DB())
}

type flavor struct {
	// readCommitted: the session default is already READ COMMITTED.
	readCommitted bool
}

func (flavor) Name() dialect.Name        { return dialect.MySQL }
func (flavor) Features() dialect.Feature { return dialect.MultiProcess }

func (flavor) Fragments() map[string]string {
	return map[string]string{
		"bigint_type":      "SIGNED",
		"async_commit":     "",
		"incoming_pending": "1 = 1",
		"incoming_order":   "i.id",
		// UTC_TIMESTAMP, not NOW(): DATETIME has no zone, so every writer must agree.
		"now":                "UTC_TIMESTAMP(6)",
		"insert_ignore":      "INSERT IGNORE",
		"insert_ignore_tail": "",
		"partition_lock":     " FOR UPDATE SKIP LOCKED",
		"read_setup":         "",
		"row_lock":           " FOR UPDATE SKIP LOCKED",
		"row_lock_wait":      " FOR UPDATE",
		"time_value":         "?",
		"message_id_type":    "BINARY(16)",
		"table_exists":       "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		// The id list, given as a JSON array, joined to incoming with
		// STRAIGHT_JOIN so every row is found by primary key. A plain
		// "DELETE … WHERE id IN (…)" may be planned as a table scan while
		// the table is small, and a scanning DELETE waits on any open
		// producer's uncommitted row (no semi-consistent read for DELETE),
		// stalling the sequencer for as long as that producer stays open.
		"delete_incoming": "DELETE i FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) d STRAIGHT_JOIN {incoming} i ON i.id = d.id",
		// Containment of a one-pair object: no JSON path, so no quoting of
		// the header name inside one.
		"header_match": "JSON_CONTAINS(b.headers, JSON_OBJECT(?, ?))",
		// Each key probed by primary key from a JSON list of hex keys: a
		// locking read of "dedup_key IN (…)" is a range scan under
		// REPEATABLE READ (a caller's transaction may be), whose gap locks
		// deadlocked producers claiming unrelated keys.
		"dedup_returning": "",
		// MariaDB has INSERT … RETURNING, MySQL does not: letters are read
		// back by partition from the INSERT's first id.
		"dead_letter_returning": "",
		"dedup_holders": "SELECT d.dedup_key, d.message_id FROM JSON_TABLE(?, '$[*]' COLUMNS (k VARCHAR(510) PATH '$')) j " +
			"STRAIGHT_JOIN {dedup_keys} d ON d.queue = ? AND d.dedup_key = UNHEX(j.k) FOR UPDATE",
		// Assignments run left to right: message_id is decided on the old
		// expires_at, which the second assignment then moves. VALUES() is
		// the form both MySQL and MariaDB accept.
		"dedup_upsert": "ON DUPLICATE KEY UPDATE " +
			"message_id = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(message_id), message_id), " +
			"expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)",
		"dedup_expire": "DELETE FROM {dedup_keys} WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?",
		// A row's body, probed by primary key from the row: STRAIGHT_JOIN
		// keeps the row's table first whatever the statistics say.
		"body_of_o": "STRAIGHT_JOIN {body} b ON b.id = o.body_id",
		"body_of_i": "STRAIGHT_JOIN {body} b ON b.id = i.body_id",
	}
}

func (flavor) NowPlus(placeholder string) string {
	return "TIMESTAMPADD(MICROSECOND, " + placeholder + ", UTC_TIMESTAMP(6))"
}

// READ COMMITTED for every outbox transaction: under REPEATABLE READ gap
// locks block producers and the sequencers of neighbouring partitions.
func (f flavor) TxOptions() *sql.TxOptions {
	if f.readCommitted {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}
func (flavor) BeginWrite() string { return "" }

// retryableRE matches go-sql-driver's "Error 1213 (40001): …" without
// importing the driver: 1213 deadlock, 1205 lock wait timeout, 40001 serialization.
var retryableRE = regexp.MustCompile(`Error (1213|1205)\b|\(40001\)`)

func (flavor) IsRetryable(err error) bool { return retryableRE.MatchString(err.Error()) }

// disconnectRE matches a connection the server dropped or killed: 1927
// "Connection was killed" (MariaDB), 2006 "server has gone away", 2013
// "lost connection", 1053 server shutdown, 4031 idle disconnect (MySQL).
var disconnectRE = regexp.MustCompile(`Error (1927|2006|2013|1053|4031)\b|invalid connection`)

func (flavor) IsDisconnect(err error) bool {
	return disconnectRE.MatchString(err.Error()) || sqlcore.IsNetworkError(err)
}

// Lock takes a named lock for the session of the pinned connection.
func (flavor) Lock(ctx context.Context, conn bun.Conn, name string) (func(context.Context) error, error) {
	var got sql.NullInt64
	if err := conn.NewRaw("SELECT GET_LOCK(?, 120)", name).Scan(ctx, &got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("GET_LOCK(%q) timed out", name)
	}
	return func(ctx context.Context) error {
		_, err := conn.NewRaw("SELECT RELEASE_LOCK(?)", name).Exec(ctx)
		return err
	}, nil
}

func (flavor) DeleteList(rows []sqlcore.MovedRow) any {
	return sqlcore.IDArray(sqlcore.IncomingIDs(rows), '[', ']')
}

// DedupKeyList is a JSON array of the keys in hex.
func (flavor) DedupKeyList(keys [][]byte) any {
	b := make([]byte, 0, 2*len(keys)*(2+32))
	b = append(b, '[')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, k)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

func (flavor) NumberedParams() bool { return false }
