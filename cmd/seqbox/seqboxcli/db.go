package seqboxcli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect/sqlite"
	dsnutil "github.com/seqbox/seqbox/internal/dsn"
)

// Drivers ParseDSN reports.
const (
	DriverPostgres = "postgres" // pgdriver
	DriverMySQL    = "mysql"    // go-sql-driver/mysql
	DriverSQLite   = "sqlite"   // sqliteshim (modernc or mattn)
)

// maxConns bounds each pool: producers, processors, sequencer and vacuum
// share it, and idle connections are kept so bursts do not reconnect.
const maxConns = 32

const dsnHelp = `  postgres://user:pass@host:5432/db?…   (postgresql:// too; pgdriver)
  mysql://user:pass@host:3306/db?…      (or the driver's own user:pass@tcp(host:3306)/db?…)
  sqlite:path/to/file.db                (sqlite://path, file:path; only migrate, demo and bench
                                         create a missing file; read-only commands open it read-only)
`

// access is what a command does to the database: it decides how a SQLite
// file is opened (the server databases are opened alike).
type access int

const (
	// accessCreate creates a missing SQLite file (migrate, demo, bench).
	accessCreate access = iota
	// accessWrite opens an existing file read-write (actions with --yes).
	accessWrite
	// accessRead opens an existing file read-only (status, lists, previews).
	accessRead
)

// ErrNoDatabase: a command that does not create a database was given a
// SQLite file that does not exist (a typo, most likely).
var ErrNoDatabase = errors.New("seqbox: no such SQLite database file")

// ErrDSN matches every error ParseDSN returns.
var ErrDSN = errors.New("seqbox: invalid DSN")

// ParseDSN recognises a DSN and returns the driver to open it with and the
// DSN in that driver's own form, with the settings seqbox needs added when
// the user did not give them:
//
//   - postgres:// and postgresql:// stay URLs; read_timeout=60s is added
//     (pgdriver's 10 s default cuts long lock waits), and sslmode=disable
//     when the host is the local machine (pgdriver otherwise insists on TLS).
//   - mysql://user:pass@host:port/db?… becomes user:pass@tcp(host:port)/db?…;
//     that native form (anything with "@tcp(" or "@unix(") is accepted too.
//     parseTime=true and maxAllowedPacket=0 are added (seqbox reads times
//     and sizes its statements from the server's packet limit).
//   - sqlite:path, sqlite://path and file:path open a database file in WAL
//     mode with a busy timeout (sqlite.DSN); a path that already carries
//     parameters ('?') is used as given.
func ParseDSN(dsn string) (driver, native string, err error) {
	return parseDSN(dsn, accessCreate)
}

func parseDSN(dsn string, acc access) (driver, native string, err error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		native, err = postgresDSN(dsn)
		return DriverPostgres, native, err
	case strings.HasPrefix(dsn, "mysql://"):
		native, err = mysqlURLToNative(dsn)
		return DriverMySQL, native, err
	case strings.Contains(dsn, "@tcp("), strings.Contains(dsn, "@unix("),
		strings.HasPrefix(dsn, "tcp("), strings.HasPrefix(dsn, "unix("):
		native, err = mysqlNative(dsn)
		return DriverMySQL, native, err
	case strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"):
		native, err = sqliteDSN(dsn, acc)
		return DriverSQLite, native, err
	default:
		return "", "", fmt.Errorf("%w %s: want one of\n%s", ErrDSN, dsnutil.Redact(dsn), dsnHelp)
	}
}

func postgresDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// url's error repeats the DSN, password included.
		return "", fmt.Errorf("%w: cannot parse the postgres URL", ErrDSN)
	}
	q := u.Query()
	var add []string // appended, so the user's own parameters keep their order
	if !q.Has("sslmode") && isLocalHost(u.Hostname()) {
		add = append(add, "sslmode=disable")
	}
	if !q.Has("read_timeout") {
		add = append(add, "read_timeout=60s")
	}
	return appendParams(dsn, add), nil
}

func isLocalHost(host string) bool {
	switch host {
	case "", "localhost", "127.0.0.1", "::1":
		return true // pgdriver dials localhost when the host is empty
	}
	return false
}

func mysqlURLToNative(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: cannot parse the mysql URL", ErrDSN)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	var b strings.Builder
	if u.User != nil {
		b.WriteString(u.User.Username())
		if pass, ok := u.User.Password(); ok {
			b.WriteString(":" + pass)
		}
		b.WriteString("@")
	}
	b.WriteString("tcp(" + net.JoinHostPort(host, port) + ")/")
	b.WriteString(strings.TrimPrefix(u.Path, "/"))
	if u.RawQuery != "" {
		b.WriteString("?" + u.RawQuery)
	}
	return mysqlNative(b.String())
}

func mysqlNative(dsn string) (string, error) {
	params := ""
	if _, after, ok := strings.Cut(dsn, "?"); ok {
		params = after
	}
	q, err := url.ParseQuery(params)
	if err != nil {
		return "", fmt.Errorf("%w: mysql parameters: %w", ErrDSN, err)
	}
	var add []string
	if !q.Has("parseTime") {
		add = append(add, "parseTime=true")
	}
	if !q.Has("maxAllowedPacket") {
		add = append(add, "maxAllowedPacket=0") // 0: read the server's max_allowed_packet
	}
	dsn = appendParams(dsn, add)
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("%w: mysql: %w", ErrDSN, err)
	}
	return dsn, nil
}

func sqliteDSN(dsn string, acc access) (string, error) {
	path := dsn
	switch {
	case strings.HasPrefix(path, "sqlite://"):
		path = strings.TrimPrefix(path, "sqlite://")
	case strings.HasPrefix(path, "sqlite:"):
		path = strings.TrimPrefix(path, "sqlite:")
	case strings.HasPrefix(path, "file:"):
		path = strings.TrimPrefix(path, "file:")
	}
	name, _, _ := strings.Cut(path, "?")
	switch {
	case name == "":
		return "", fmt.Errorf("%w %q: no file path", ErrDSN, dsn)
	case name == ":memory:" || strings.Contains(path, "mode=memory"):
		// Every pooled connection would get its own empty database.
		return "", fmt.Errorf("%w %q: in-memory SQLite is not supported, use a file", ErrDSN, dsn)
	}
	var mode string
	switch acc {
	case accessRead:
		// No journal_mode pragma: setting it is a write. A file seqbox
		// created is in WAL mode already.
		mode = "mode=ro"
		if !strings.Contains(path, "?") {
			if sqliteshim.DriverName() == "sqlite3" { // mattn's parameter names, as sqlite.DSN
				return "file:" + path + "?mode=ro&_busy_timeout=10000", nil
			}
			return "file:" + path + "?mode=ro&_pragma=busy_timeout(10000)", nil
		}
	case accessWrite:
		mode = "mode=rw" // SQLite's own "do not create"
	}
	if strings.Contains(path, "?") {
		if mode != "" && !strings.Contains(path, "mode=") {
			path += "&" + mode
		}
		return "file:" + path, nil
	}
	native := sqlite.DSN(sqliteshim.DriverName(), path)
	if mode != "" {
		native += "&" + mode
	}
	return native, nil
}

// sqlitePath is the file a SQLite DSN names.
func sqlitePath(dsn string) string {
	for _, p := range []string{"sqlite://", "sqlite:", "file:"} {
		if rest, ok := strings.CutPrefix(dsn, p); ok {
			name, _, _ := strings.Cut(rest, "?")
			return name
		}
	}
	return dsn
}

func appendParams(dsn string, add []string) string {
	if len(add) == 0 {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
		if strings.HasSuffix(dsn, "?") || strings.HasSuffix(dsn, "&") {
			sep = ""
		}
	}
	return dsn + sep + strings.Join(add, "&")
}

// OpenDB opens dsn (see ParseDSN) as a *bun.DB with the dialect and driver
// settings seqbox expects, and checks that the database answers.
// A SQLite file that does not exist is created.
func OpenDB(ctx context.Context, dsn string) (*bun.DB, error) {
	return openDB(ctx, dsn, accessCreate)
}

// openDB is OpenDB for a command's access: with accessRead or accessWrite
// a SQLite file that does not exist is ErrNoDatabase, not created, and
// with accessRead the file is opened read-only.
func openDB(ctx context.Context, dsn string, acc access) (*bun.DB, error) {
	driver, native, err := parseDSN(dsn, acc)
	if err != nil {
		return nil, err
	}
	if driver == DriverSQLite && acc != accessCreate {
		// Checked first for a clear error; the mode in the DSN makes sure.
		path := sqlitePath(dsn)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s (this command does not create one; seqbox migrate --dsn … does)", ErrNoDatabase, path)
		}
	}
	var (
		sqldb *sql.DB
		wrap  func(*sql.DB) *bun.DB
	)
	switch driver {
	case DriverPostgres:
		connector, err := pgConnector(native)
		if err != nil {
			return nil, err
		}
		sqldb = sql.OpenDB(connector)
		wrap = func(sqldb *sql.DB) *bun.DB { return bun.NewDB(sqldb, pgdialect.New()) }
	case DriverMySQL:
		if sqldb, err = sql.Open("mysql", native); err != nil {
			return nil, fmt.Errorf("seqbox: open %s: %w", dsnutil.Redact(dsn), err)
		}
		// seqbox stores and compares times in UTC (docs/ARCHITECTURE.md, "Tables and locks").
		wrap = func(sqldb *sql.DB) *bun.DB {
			return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
		}
	case DriverSQLite:
		if sqldb, err = sql.Open(sqliteshim.ShimName, native); err != nil {
			return nil, fmt.Errorf("seqbox: open %s: %w", dsnutil.Redact(dsn), err)
		}
		wrap = func(sqldb *sql.DB) *bun.DB { return bun.NewDB(sqldb, sqlitedialect.New()) }
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	// Ping before bun.NewDB: mysqldialect queries the server version there
	// and only logs a failure.
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqldb.PingContext(pingCtx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("seqbox: connect to %s: %w", dsnutil.Redact(dsn), err)
	}
	if driver == DriverMySQL {
		if sqldb, err = mysqlReadCommitted(pingCtx, sqldb, native); err != nil {
			return nil, fmt.Errorf("seqbox: connect to %s: %w", dsnutil.Redact(dsn), err)
		}
		sqldb.SetMaxOpenConns(maxConns)
		sqldb.SetMaxIdleConns(maxConns)
	}
	return wrap(sqldb), nil
}

// mysqlReadCommitted reopens db with READ COMMITTED as the session default
// unless the DSN already chooses an isolation: seqbox then skips a SET
// TRANSACTION round trip per transaction (README, Operations). The variable
// is transaction_isolation on MySQL 8 and MariaDB 11.1+, tx_isolation on
// older MariaDB, where the other one fails the connection.
func mysqlReadCommitted(ctx context.Context, db *sql.DB, native string) (_ *sql.DB, err error) {
	defer func() {
		if err != nil {
			_ = db.Close()
		}
	}()
	cfg, err := mysql.ParseDSN(native)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Params["transaction_isolation"]; ok {
		return db, nil
	}
	if _, ok := cfg.Params["tx_isolation"]; ok {
		return db, nil
	}
	variable := "transaction_isolation"
	var level string
	if err := db.QueryRowContext(ctx, "SELECT @@transaction_isolation").Scan(&level); err != nil {
		variable = "tx_isolation"
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[variable] = "'READ-COMMITTED'"
	next, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	if err := next.PingContext(ctx); err != nil {
		_ = next.Close()
		return nil, err
	}
	_ = db.Close()
	return next, nil
}

// pgConnector turns pgdriver's panic on a DSN it rejects (e.g. an unknown
// sslmode) into an error.
func pgConnector(dsn string) (c *pgdriver.Connector, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: postgres: %v", ErrDSN, r)
		}
	}()
	return pgdriver.NewConnector(pgdriver.WithDSN(dsn)), nil
}
