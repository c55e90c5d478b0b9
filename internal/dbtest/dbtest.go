// Package dbtest opens the three test databases. PostgreSQL and MariaDB/MySQL
// come from SEQBOX_PG_DSN and SEQBOX_MYSQL_DSN (defaulting to the local
// servers); SQLite is a file in the test's temporary directory. A server
// that cannot be reached fails the test when CI=true and skips it, loudly,
// otherwise.
package dbtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql" // also the driver of the MySQL tests
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/sqlite"
)

// Default DSNs of the local servers.
const (
	PostgresDSNDefault = "postgres://postgres:@127.0.0.1:5432/test?sslmode=disable"
	MySQLDSNDefault    = "root@tcp(127.0.0.1:3306)/test?parseTime=true&maxAllowedPacket=0"
)

// Opener opens a database for a test; the database is closed at cleanup.
type Opener struct {
	Name string
	Open func(t testing.TB) *bun.DB
}

// All returns PostgreSQL, MySQL and SQLite.
func All() []Opener {
	return []Opener{{"postgres", Postgres}, {"mysql", MySQL}, {"sqlite", SQLite}}
}

// PostgresDSN is SEQBOX_PG_DSN or the local default.
func PostgresDSN() string { return envOr("SEQBOX_PG_DSN", PostgresDSNDefault) }

// MySQLDSN is SEQBOX_MYSQL_DSN or the local default.
func MySQLDSN() string { return envOr("SEQBOX_MYSQL_DSN", MySQLDSNDefault) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Postgres opens the PostgreSQL test database with pgdriver.
func Postgres(t testing.TB) *bun.DB {
	dsn := PostgresDSN()
	if !strings.Contains(dsn, "read_timeout") {
		// pgdriver's 10 s read timeout would cut long lock waits.
		dsn += sep(dsn) + "read_timeout=60s"
	}
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	return finish(t, "PostgreSQL", "SEQBOX_PG_DSN", sqldb, func() *bun.DB { return bun.NewDB(sqldb, pgdialect.New()) })
}

// MySQL opens the MariaDB/MySQL test database.
func MySQL(t testing.TB) *bun.DB {
	sqldb, err := sql.Open("mysql", MySQLDSN())
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	return finish(t, "MariaDB/MySQL", "SEQBOX_MYSQL_DSN", sqldb, func() *bun.DB {
		return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	})
}

// Server returns the address ("host:port") of the server of a test
// database, and opens that database at another address instead: a test's
// TCP proxy, which can refuse connections while the shared server stays up.
// The database opened is not pinged, and is closed at cleanup. ok is false
// for SQLite, which has no server, and for a server reached otherwise than
// by TCP.
func Server(t testing.TB, name dialect.Name) (addr string, openAt func(addr string) *bun.DB, ok bool) {
	switch name {
	case dialect.Postgres:
		u, err := url.Parse(PostgresDSN())
		if err != nil {
			t.Fatalf("SEQBOX_PG_DSN: %v", err)
		}
		addr = net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "5432"))
		return addr, func(at string) *bun.DB {
			v := *u
			v.Host = at
			dsn := v.String()
			if !strings.Contains(dsn, "read_timeout") {
				dsn += sep(dsn) + "read_timeout=60s"
			}
			sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
			return closed(t, bun.NewDB(sqldb, pgdialect.New()))
		}, true
	case dialect.MySQL:
		cfg, err := mysql.ParseDSN(MySQLDSN())
		if err != nil {
			t.Fatalf("SEQBOX_MYSQL_DSN: %v", err)
		}
		if cfg.Net != "tcp" {
			return "", nil, false
		}
		return cfg.Addr, func(at string) *bun.DB {
			c := cfg.Clone()
			c.Addr = at
			sqldb, err := sql.Open("mysql", c.FormatDSN())
			if err != nil {
				t.Fatalf("open mysql: %v", err)
			}
			return closed(t, bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))))
		}, true
	default:
		return "", nil, false
	}
}

func closed(t testing.TB, db *bun.DB) *bun.DB {
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// SQLite opens a fresh database file in the test's temporary directory.
func SQLite(t testing.TB) *bun.DB {
	path := filepath.Join(t.TempDir(), "seqbox.db")
	sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), path))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	return finish(t, "SQLite", "", sqldb, func() *bun.DB { return bun.NewDB(sqldb, sqlitedialect.New()) })
}

func finish(t testing.TB, what, envVar string, sqldb *sql.DB, wrap func() *bun.DB) *bun.DB {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		Unreachable(t, what, envVar, err)
	}
	sqldb.SetMaxOpenConns(24)
	sqldb.SetMaxIdleConns(24)
	db := wrap()
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Unreachable fails under CI=true and skips loudly otherwise.
func Unreachable(t testing.TB, what, envVar string, err error) {
	msg := fmt.Sprintf("%s is not reachable (%v)", what, err)
	if envVar != "" {
		msg += "; set " + envVar + " or start the server (.ci/run does)"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s TESTS: %s ***\n\n", strings.ToUpper(what), msg)
	t.Skip(msg)
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// Prefix returns a table prefix unique to this test run, so tests sharing a
// database never share tables. When the test ends, every table and view of
// the prefix is dropped from the shared servers (dropPrefixed): a suite run
// left hundreds behind otherwise.
func Prefix(t testing.TB) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	prefix := "sbt" + hex.EncodeToString(b[:]) + "_"
	t.Cleanup(func() { dropPrefixed(t, prefix) })
	return prefix
}

// IncomingRows is the WHERE clause of a test's read of incoming that
// counts messages: MariaDB's incoming also holds each partition's two
// stops, rows with negative ids that no read of the library sees
// (dialect/mysql/migration/012_incoming_stops.sql).
const IncomingRows = "id > 0"
