// Package mysql is the seqbox dialect for MySQL 8.0.4+ and MariaDB 10.6+
// (both have SKIP LOCKED and JSON_TABLE). Open the *bun.DB with mysqldialect and, for
// readable timestamps, parseTime=true; seqbox itself writes times as UTC.
package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// ErrServerTooOld is returned by New for a server without SKIP LOCKED and JSON_TABLE.
var ErrServerTooOld = errors.New("seqbox: MySQL 8.0.4+ or MariaDB 10.6+ is required")

// Dialect is the MySQL/MariaDB implementation of dialect.Dialect.
type Dialect struct {
	*sqlcore.Core
	mariaDB      bool
	vacuumDelete string
	readState    string
}

var _ dialect.Dialect = (*Dialect)(nil)

// New checks the server version and reads max_allowed_packet, which bounds
// the size of one statement (bun sends values inline, bytes as hex).
func New(ctx context.Context, db *bun.DB, prefix string) (*Dialect, error) {
	var version string
	var packet int64
	if err := db.NewRaw("SELECT VERSION(), @@max_allowed_packet").Scan(ctx, &version, &packet); err != nil {
		return nil, fmt.Errorf("seqbox: read MySQL version: %w", err)
	}
	mariaDB, err := checkVersion(version)
	if err != nil {
		return nil, err
	}
	cfg, err := config(db, prefix)
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
		return nil, fmt.Errorf("seqbox: read MySQL isolation level: %w", err)
	}
	cfg.Flavor = flavor{readCommitted: strings.EqualFold(isolation, "READ-COMMITTED")}
	// Leave room for the statement text around the hex-encoded values.
	maxStatement := int(packet) - 64<<10
	cfg.MaxPayloadBytes, cfg.MaxStatementBytes = maxStatement/2-64<<10, maxStatement
	core, err := sqlcore.New(cfg)
	if err != nil {
		return nil, err
	}
	t := core.Tables()
	return &Dialect{
		Core: core, mariaDB: mariaDB,
		// A multi-table DELETE: the portable DELETE … WHERE id IN (SELECT …)
		// scans the whole body table per chunk on MariaDB. STRAIGHT_JOIN
		// reads outgoing first and finds bodies by primary key, so it never
		// waits on the uncommitted body rows of open producers.
		vacuumDelete: "DELETE o, b FROM " + t.Outgoing + " o STRAIGHT_JOIN " + t.Body + " b ON b.id = o.body_id " +
			"WHERE o.partition_id = ? AND o.seq > ? AND o.seq <= ?",
		readState: "SELECT processed_seq, attempts FROM " + t.Processor + " WHERE partition_id = ? AND locked_by = ?",
	}, nil
}

// SchemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func SchemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

// config is shared by New and SchemaStatements; New adds the size limits,
// which depend on the server.
func config(db *bun.DB, prefix string) (sqlcore.Config, error) {
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return sqlcore.Config{}, err
	}
	return sqlcore.Config{DB: db, Prefix: prefix, Flavor: flavor{}, Bootstrap: boot, Migrations: migs}, nil
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

// MariaDB reports whether the server is MariaDB rather than MySQL.
func (d *Dialect) MariaDB() bool { return d.mariaDB }

// ProcessorLease takes the lease with UPDATE then SELECT: MySQL has no
// UPDATE … RETURNING. Both run in one READ COMMITTED transaction.
func (d *Dialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	state, ok, err := d.lease(ctx, p)
	if err != nil || !ok {
		return dialect.ProcessorLeaseResult{}, err
	}
	return d.LeaseRead(ctx, p, state)
}

func (d *Dialect) lease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorState, bool, error) {
	var state dialect.ProcessorState
	var ok bool
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		state, ok, err = d.leaseOn(ctx, tx, p)
		return err
	})
	return state, ok, err
}

// leaseOn takes the lease inside tx: the guarded UPDATE, then a read of
// the row it updated (no RETURNING on MySQL).
func (d *Dialect) leaseOn(ctx context.Context, tx bun.Tx, p *dialect.ProcessorLeaseParams) (dialect.ProcessorState, bool, error) {
	res, err := d.Raw(tx, d.LeaseSQL(), p.Owner, flavor{}.NowPlusArg(p.Duration), p.PartitionID, p.PartitionID).Exec(ctx)
	if err != nil {
		return dialect.ProcessorState{}, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return dialect.ProcessorState{}, false, err
	}
	var state dialect.ProcessorState
	var attempts int
	if err := d.Raw(tx, d.readState, p.PartitionID, p.Owner).Scan(ctx, &state.ProcessedSeq, &attempts); err != nil {
		return dialect.ProcessorState{}, false, err
	}
	state.Attempts = attempts - 1
	return state, true, nil
}

// ProcessorAckLease acks and re-leases in one transaction.
func (d *Dialect) ProcessorAckLease(ctx context.Context, ack *dialect.ProcessorUpdateParams, next *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	return d.AckLease(ctx, ack, next, d.leaseOn)
}

// VacuumDelete deletes a seq range of outgoing rows and their bodies in one statement.
func (d *Dialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	var n int64
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := d.Raw(tx, d.vacuumDelete, p.PartitionID, p.FromSeq, p.ToSeq).Exec(ctx)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	// Each message is one outgoing and one body row.
	return int(n / 2), err
}

type flavor struct {
	// readCommitted: the session default is already READ COMMITTED.
	readCommitted bool
}

func (flavor) Name() dialect.Name        { return dialect.MySQL }
func (flavor) Features() dialect.Feature { return dialect.RowLocks }

// UTC_TIMESTAMP, not NOW(): DATETIME has no zone, so every writer must agree.
func (flavor) Now() string                    { return "UTC_TIMESTAMP(6)" }
func (flavor) NowPlus() string                { return "TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6))" }
func (flavor) NowPlusArg(d time.Duration) any { return d.Microseconds() }
func (flavor) PartitionLock() string          { return " FOR UPDATE SKIP LOCKED" }
func (flavor) SequencerReadSetup() string     { return "" }
func (flavor) RowLock() string                { return " FOR UPDATE SKIP LOCKED" }
func (flavor) InsertIgnore() string           { return "INSERT IGNORE" }
func (flavor) InsertIgnoreTail() string       { return "" }

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

// DeleteIncoming joins the id list, given as a JSON array, to incoming with
// STRAIGHT_JOIN so every row is found by primary key. A plain
// "DELETE … WHERE id IN (…)" may be planned as a table scan while the
// table is small, and a scanning DELETE waits on any open producer's
// uncommitted row (no semi-consistent read for DELETE), stalling the
// sequencer for as long as that producer's transaction stays open.
func (flavor) DeleteIncoming() string {
	return "DELETE i FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) d STRAIGHT_JOIN {incoming} i ON i.id = d.id"
}

func (flavor) IDList(ids []int64) any { return sqlcore.IDArray(ids, '[', ']') }
