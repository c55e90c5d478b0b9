package dbtest

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
)

// PostgresSession opens the PostgreSQL test database as Postgres does, its
// sessions started with the given run-time settings ("name=value", e.g.
// "synchronous_commit=remote_write"): pgdriver sends a DSN's parameters it
// does not know itself at connection start. It is how a test gives seqbox
// connections whose defaults differ from the server's without
// reconfiguring the shared server.
func PostgresSession(t testing.TB, settings ...string) *bun.DB {
	dsn := PostgresDSN()
	if !strings.Contains(dsn, "read_timeout") {
		dsn += sep(dsn) + "read_timeout=60s"
	}
	for _, s := range settings {
		dsn += sep(dsn) + s
	}
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	return finish(t, "PostgreSQL", "SEQBOX_PG_DSN", sqldb, func() *bun.DB { return bun.NewDB(sqldb, pgdialect.New()) })
}
