package seqboxcli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/internal/dbtest"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()
	sqliteFile := func(path string) string { return sqlite.DSN(sqliteshim.DriverName(), path) }
	tests := []struct {
		name, in, driver, want string
	}{
		{"postgres local gets sslmode and read_timeout", "postgres://postgres:@127.0.0.1:5432/test",
			DriverPostgres, "postgres://postgres:@127.0.0.1:5432/test?sslmode=disable&read_timeout=60s"},
		{"postgresql scheme, localhost", "postgresql://u:p@localhost/db",
			DriverPostgres, "postgresql://u:p@localhost/db?sslmode=disable&read_timeout=60s"},
		{"postgres keeps the user's sslmode and order", "postgres://u@127.0.0.1/db?application_name=x&sslmode=require",
			DriverPostgres, "postgres://u@127.0.0.1/db?application_name=x&sslmode=require&read_timeout=60s"},
		{"postgres remote host: no sslmode added", "postgres://u:p@db.example.com:5432/prod",
			DriverPostgres, "postgres://u:p@db.example.com:5432/prod?read_timeout=60s"},
		{"postgres keeps read_timeout", "postgres://u@[::1]:5432/db?read_timeout=5s",
			DriverPostgres, "postgres://u@[::1]:5432/db?read_timeout=5s&sslmode=disable"},
		{"mysql URL", "mysql://root@127.0.0.1:3306/test",
			DriverMySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true&maxAllowedPacket=0"},
		{"mysql URL with password, default port, params", "mysql://app:s3cr%40t@db.local/shop?timeout=5s",
			DriverMySQL, "app:s3cr@t@tcp(db.local:3306)/shop?timeout=5s&parseTime=true&maxAllowedPacket=0"},
		{"mysql URL keeps the user's settings", "mysql://root@127.0.0.1/test?parseTime=true&maxAllowedPacket=4194304",
			DriverMySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true&maxAllowedPacket=4194304"},
		{"mysql native", "root@tcp(127.0.0.1:3306)/test",
			DriverMySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true&maxAllowedPacket=0"},
		{"mysql native with params", "u:p@tcp(h:3307)/d?parseTime=true",
			DriverMySQL, "u:p@tcp(h:3307)/d?parseTime=true&maxAllowedPacket=0"},
		{"mysql native unix socket", "root@unix(/run/mysqld/mysqld.sock)/test",
			DriverMySQL, "root@unix(/run/mysqld/mysqld.sock)/test?parseTime=true&maxAllowedPacket=0"},
		{"sqlite:path", "sqlite:seqbox-demo.db", DriverSQLite, sqliteFile("seqbox-demo.db")},
		{"sqlite://relative", "sqlite://data/x.db", DriverSQLite, sqliteFile("data/x.db")},
		{"sqlite:///absolute", "sqlite:///tmp/x.db", DriverSQLite, sqliteFile("/tmp/x.db")},
		{"file:", "file:/tmp/x.db", DriverSQLite, sqliteFile("/tmp/x.db")},
		{"sqlite with params is used as is", "sqlite:x.db?_pragma=busy_timeout(1000)", DriverSQLite, "file:x.db?_pragma=busy_timeout(1000)"},
		{"file with params is used as is", "file:x.db?_pragma=journal_mode(WAL)", DriverSQLite, "file:x.db?_pragma=journal_mode(WAL)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			driver, got, err := ParseDSN(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.driver, driver)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseDSNMySQLRoundTrip(t *testing.T) {
	t.Parallel()
	// The converted DSN must mean to the driver what the URL meant.
	_, native, err := ParseDSN("mysql://app:p%40ss%2Fw:rd@[::1]:3307/shop?timeout=5s")
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(native)
	require.NoError(t, err)
	require.Equal(t, "app", cfg.User)
	require.Equal(t, "p@ss/w:rd", cfg.Passwd)
	require.Equal(t, "tcp", cfg.Net)
	require.Equal(t, "[::1]:3307", cfg.Addr)
	require.Equal(t, "shop", cfg.DBName)
	require.True(t, cfg.ParseTime)
	require.Zero(t, cfg.MaxAllowedPacket)
}

func TestParseDSNErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", "seqbox.db", "redis://localhost", "sqlite:", "sqlite::memory:", "file::memory:?cache=shared",
		"file:x.db?mode=memory", "mysql://root@127.0.0.1/test?parseTime=%zz",
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			_, _, err := ParseDSN(in)
			require.ErrorIs(t, err, ErrDSN)
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	_, _, err := ParseDSN("pgsql://u:secret@h/db")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
}

func TestOpenDBSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := OpenDB(ctx, "sqlite:"+filepath.Join(t.TempDir(), "x.db"))
	require.NoError(t, err)
	defer db.Close()
	var mode string
	require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", strings.ToLower(mode))
}

func TestOpenDBBadPostgresOption(t *testing.T) {
	t.Parallel()
	// pgdriver panics on an sslmode it does not know; OpenDB must not.
	_, err := OpenDB(context.Background(), "postgres://u@127.0.0.1/db?sslmode=bogus")
	require.True(t, errors.Is(err, ErrDSN), "got %v", err)
}

// TestOpenDBMySQLReadCommitted: OpenDB makes READ COMMITTED the session
// default unless the DSN chooses an isolation itself.
func TestOpenDBMySQLReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	probe := dbtest.MySQL(t) // skips (or fails under CI) when unreachable
	variable := "@@transaction_isolation"
	if _, err := probe.ExecContext(ctx, "SELECT "+variable); err != nil {
		variable = "@@tx_isolation" // MariaDB before 11.1
	}
	isolation := func(dsn string) string {
		db, err := OpenDB(ctx, dsn)
		require.NoError(t, err)
		defer db.Close()
		var level string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT "+variable).Scan(&level))
		return level
	}
	require.Equal(t, "READ-COMMITTED", isolation(dbtest.MySQLDSN()))
	chosen := strings.TrimPrefix(variable, "@@") + "=%27SERIALIZABLE%27"
	dsn := dbtest.MySQLDSN()
	if strings.Contains(dsn, "?") {
		dsn += "&" + chosen
	} else {
		dsn += "?" + chosen
	}
	require.Equal(t, "SERIALIZABLE", isolation(dsn), "an isolation in the DSN is kept")
}
