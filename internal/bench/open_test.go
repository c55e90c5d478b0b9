package bench

import (
	"context"
	"database/sql"
	"strings"

	_ "github.com/go-sql-driver/mysql" // driver for the MySQL runs
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
)

// openPostgres and openMySQL open a server the way the CLI does (without
// its DSN parsing), for the tests and the live run.
func openPostgres(_ context.Context, dsn string) (*bun.DB, error) {
	if !strings.Contains(dsn, "read_timeout") {
		dsn += "&read_timeout=60s" // pgdriver's 10 s default cuts long lock waits
	}
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	return bun.NewDB(sqldb, pgdialect.New()), nil
}

func openMySQL(ctx context.Context, dsn string) (*bun.DB, error) {
	sqldb, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	if err := sqldb.PingContext(ctx); err != nil {
		return nil, err
	}
	return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))), nil
}
