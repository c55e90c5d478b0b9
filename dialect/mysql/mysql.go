// Package mysql is the seqbox dialect for MariaDB 10.6+ (SKIP LOCKED,
// JSON_TABLE; tested on 10.11). It also opens MySQL 8.0.4+, which has both,
// but MySQL is not tested and not supported: MySQL refuses idempotent
// enqueue's locking read over JSON_TABLE (README, "Databases"). TiDB,
// which speaks the same protocol, is refused (ErrUnsupportedServer;
// docs/DISTRIBUTED.md). Open the *bun.DB with mysqldialect and, for
// readable timestamps, parseTime=true; seqbox itself writes times as UTC.
//
// Every statement the dialect runs is written out whole in this package,
// one file per area (docs/ARCHITECTURE.md, "The SQL layer"), and rendered
// in testdata/sql/mysql.sql. Times are DATETIME(6) in UTC: "now" is always
// UTC_TIMESTAMP(6), never NOW(), because a DATETIME has no zone and every
// writer must agree; "now plus" is TIMESTAMPADD(MICROSECOND, …, UTC_TIMESTAMP(6)).
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

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// ErrServerTooOld is returned by New for a server without SKIP LOCKED and JSON_TABLE.
var ErrServerTooOld = errors.New("seqbox: MySQL 8.0.4+ or MariaDB 10.6+ is required")

// ErrUnsupportedServer is returned by New for a server that speaks MySQL's
// protocol but lacks what the dialect relies on. TiDB is one: it accepts
// FOR UPDATE SKIP LOCKED without taking the lock, so two processes would
// number the same partition and run one partition's handler at once, and it
// has no JSON_TABLE (docs/DISTRIBUTED.md).
var ErrUnsupportedServer = errors.New("seqbox: this MySQL-compatible server is not supported")

// mysqlDialect is the MySQL/MariaDB implementation of dialect.Dialect. It
// implements engine.AckLeaser with one READ COMMITTED transaction and
// engine.GroupLeaser with a few statements for many partitions.
type mysqlDialect struct {
	*kit.Runner
	// lease takes one partition's lease: UPDATE, then read the row back
	// (MySQL has no UPDATE … RETURNING), in the caller's transaction.
	lease   kit.LeaseFunc
	rotates bool           // MariaDB: the message tables rotate (rotate.go)
	gens    kit.GenCache   // the generation new messages go to (rotate.go)
	stall   kit.StallWatch // whether a pinned generation drains (rotate.go)
	// onRotate is a test's hook into a truncation (rotateHook); nil.
	onRotate func(ctx context.Context, stage string, conn bun.Conn) error
	// floors are the moves' floors (floors.go); nil on MySQL, whose
	// server this project does not test them on.
	floors *moveFloors
}

var (
	_ dialect.Dialect = (*mysqlDialect)(nil)
)

// probeSQL is what New reads from the server before the dialect exists:
// its version and packet size, and the connections' default isolation,
// whose variable is named differently on each server.
type probeSQL struct {
	// Server reads the version (MySQL or MariaDB, and which release) and
	// max_allowed_packet, which bounds one statement: bun sends values
	// inline, bytes as hex.
	Server *kit.Stmt
	// IsolationMySQL and IsolationMariaDB read the session's default
	// isolation level; MariaDB has transaction_isolation only from 11.1.
	IsolationMySQL   *kit.Stmt
	IsolationMariaDB *kit.Stmt
	// Allocation reads how this server allocates AUTO_INCREMENT ids and
	// whether it is a Galera node (MariaDB).
	Allocation *kit.Stmt
}

var probes = probeSQL{
	Server:           kit.Inline(`SELECT VERSION(), @@max_allowed_packet`),
	IsolationMySQL:   kit.Inline(`SELECT @@transaction_isolation`),
	IsolationMariaDB: kit.Inline(`SELECT @@tx_isolation`),
	Allocation:       kit.Inline(`SELECT @@auto_increment_increment, @@wsrep_on`),
}

// server is what the probes found.
type server struct {
	// packet is max_allowed_packet, in bytes.
	packet int64
	// readCommitted: the connections already default to READ COMMITTED.
	readCommitted bool
	// mariaDB: the server is MariaDB, whose SET STATEMENT bounds the
	// rotator's lock wait (rotate.go); on MySQL the tables do not rotate.
	mariaDB bool
	// floors: the moves keep floors (floors.go); MariaDB, not clustered.
	floors bool
}

// New checks the server version and reads max_allowed_packet, which bounds
// the size of one statement (bun sends values inline, bytes as hex). If the
// server cannot be reached it fails at once; seqbox's Builder.Start calls
// it again until its context ends.
func New(ctx context.Context, db *bun.DB, prefix string) (dialect.Dialect, error) {
	probe, err := kit.New(kit.Config{DB: db, Prefix: prefix, Name: dialect.MySQL, Sets: []any{probes},
		IsRetryable: isRetryable, IsDisconnect: isDisconnect})
	if err != nil {
		return nil, err
	}
	var version string
	var packet int64
	if err := probe.Query(ctx, db, probes.Server, nil, &version, &packet); err != nil {
		return nil, readErr(err, "reading its version")
	}
	mariaDB, err := checkVersion(version)
	if err != nil {
		return nil, err
	}
	// When the connections already default to READ COMMITTED (DSN parameter
	// transaction_isolation, or tx_isolation on MariaDB), skip the extra
	// SET TRANSACTION round trip the driver sends before every BEGIN.
	isolation := probes.IsolationMySQL
	if mariaDB {
		isolation = probes.IsolationMariaDB
	}
	var level string
	if err := probe.Query(ctx, db, isolation, nil, &level); err != nil {
		return nil, readErr(err, "reading its isolation level")
	}
	srv := server{packet: packet, readCommitted: strings.EqualFold(level, "READ-COMMITTED"), mariaDB: mariaDB, floors: mariaDB}
	if mariaDB {
		// The move floors rest on ids allocated in increasing order on
		// this server (floors.go): not in a Galera cluster, whose nodes
		// allocate interleaved ids and list only their own transactions.
		var increment, wsrep int64
		if err := probe.Query(ctx, db, probes.Allocation, nil, &increment, &wsrep); err != nil || increment != 1 || wsrep != 0 {
			srv.floors = false
		}
	}
	d, err := newDialect(db, prefix, srv)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// newDialect builds the dialect for what the probes found, without
// touching the database (the golden test builds it with no database).
func newDialect(db *bun.DB, prefix string, srv server) (*mysqlDialect, error) {
	schema, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return nil, err
	}
	// Leave room for the statement text around the hex-encoded values.
	maxStatement := int(srv.packet) - 64<<10
	r, err := kit.New(kit.Config{
		DB: db, Prefix: prefix, Name: dialect.MySQL, Features: dialect.MultiProcess,
		Limits: dialect.Limits{MaxPayloadBytes: maxStatement/2 - 64<<10, MaxStatementBytes: maxStatement},
		Tuning: dialect.Tuning{SequencerWorkers: 2, VacuumWorkers: 4},
		Sets: []any{probes, schemaSQL, migrationLock, registerSQL, insertSQL, enqueueSQL, dedupSQL, sequencerSQL, moveSQL, floorSQL,
			processorSQL, leaseSQL, groupSQL, deadLetterSQL, purgeSQL, vacuumSQL, statsSQL, rotateSQL, settings},
		Schema:       schema,
		TxOptions:    txOptions(srv.readCommitted),
		IsRetryable:  isRetryable,
		IsDisconnect: isDisconnect,
	})
	if err != nil {
		return nil, err
	}
	d := &mysqlDialect{Runner: r, lease: kit.LeaseThenRead(r, leaseSQL.Lease, leaseSQL.State), rotates: srv.mariaDB}
	if srv.floors {
		d.floors = &moveFloors{}
	}
	return d, nil
}

// txOptions: READ COMMITTED for every outbox transaction, because under
// REPEATABLE READ gap locks block producers and the sequencers of
// neighbouring partitions; nil when the connections already default to it.
func txOptions(readCommitted bool) *sql.TxOptions {
	if readCommitted {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

// readErr is a failed read of the server's settings in New. A server that
// cannot be reached says so, and is marked transient: Start waits for it
// (a server still starting), the admin entry points fail at once.
func readErr(err error, doing string) error {
	if isDisconnect(err) {
		return lifecycle.Transient(dialect.Wrap(err, "MySQL/MariaDB unreachable ("+doing+")"))
	}
	return dialect.Wrap(err, "MySQL/MariaDB: "+doing)
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// checkVersion accepts MySQL >= 8.0.4 and MariaDB >= 10.6 (SKIP LOCKED,
// JSON_TABLE), and refuses TiDB, which reports a MySQL version
// ("8.0.11-TiDB-v8.5.3") but takes no lock for SKIP LOCKED
// (docs/DISTRIBUTED.md, "TiDB").
func checkVersion(v string) (mariaDB bool, err error) {
	if strings.Contains(strings.ToLower(v), "-tidb-") {
		return false, fmt.Errorf("%w: server is %s; TiDB takes no lock for FOR UPDATE SKIP LOCKED (pingcap/tidb#69720) and has no JSON_TABLE, see docs/DISTRIBUTED.md",
			ErrUnsupportedServer, v)
	}
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
