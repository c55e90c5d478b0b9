package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
)

// dropTimeout bounds a cleanup's drops on one server: a lock held by a
// connection the test leaked fails the drop instead of hanging the test.
const dropTimeout = 10 * time.Second

// dropPrefixed drops, on the shared PostgreSQL and MariaDB/MySQL test
// databases, every table and view whose name starts with prefix: a test's
// schema, its generations and its scratch tables alike, however the test
// created them. A server it cannot reach has nothing of the test's to drop
// (its tests skipped or failed already). A drop that fails leaves tables
// behind and is logged, never a test failure. SEQBOX_KEEP_TABLES keeps them
// for a look after the run.
func dropPrefixed(t testing.TB, prefix string) {
	if os.Getenv("SEQBOX_KEEP_TABLES") != "" {
		return
	}
	for _, server := range []struct {
		name string
		drop func(ctx context.Context, prefix string) error
	}{{"PostgreSQL", dropPostgres}, {"MariaDB/MySQL", dropMySQL}} {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		if err := server.drop(ctx, prefix); err != nil && !errors.Is(err, errUnreachable) {
			t.Logf("dbtest: %s tables of prefix %s left behind: %v", server.name, prefix, err)
		}
		cancel()
	}
}

// errUnreachable is a server the cleanup could not reach.
var errUnreachable = errors.New("unreachable")

// dropPostgres drops prefix's relations in the search path's first schema.
// Views go first; CASCADE takes a partitioned table's partitions with it.
func dropPostgres(ctx context.Context, prefix string) error {
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(PostgresDSN()), pgdriver.WithDialTimeout(2*time.Second)))
	db := bun.NewDB(sqldb, pgdialect.New())
	defer db.Close()
	return dropWith(ctx, db, prefix,
		"SET lock_timeout = '5s'",
		`SELECT relname AS name, relkind = 'v' AS is_view FROM pg_class
WHERE relnamespace = CAST(current_schema() AS regnamespace) AND relkind IN ('r', 'p', 'v') AND starts_with(relname, ?)`,
		"DROP TABLE IF EXISTS ? CASCADE")
}

// dropMySQL drops prefix's views, then its tables, in the DSN's database.
func dropMySQL(ctx context.Context, prefix string) error {
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	sqldb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	db := bun.NewDB(sqldb, mysqldialect.New())
	defer db.Close()
	return dropWith(ctx, db, prefix,
		"SET SESSION lock_wait_timeout = 5",
		`SELECT table_name AS name, table_type = 'VIEW' AS is_view FROM information_schema.tables
WHERE table_schema = DATABASE() AND LEFT(table_name, CHAR_LENGTH(?0)) = ?0`,
		"DROP TABLE IF EXISTS ?")
}

// dropWith runs one cleanup on a connection of its own: the session's lock
// timeout, the lookup of the prefix's relations (?0 is the prefix), then
// DROP VIEW of the views and dropTables of the tables, each kind in one statement.
func dropWith(ctx context.Context, db *bun.DB, prefix, lockTimeout, lookup, dropTables string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreachable, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, lockTimeout); err != nil {
		return err
	}
	var found []struct {
		Name   string `bun:"name"`
		IsView bool   `bun:"is_view"`
	}
	if err := conn.NewRaw(lookup, prefix).Scan(ctx, &found); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	var views, tables []bun.Ident
	for _, f := range found {
		if f.IsView {
			views = append(views, bun.Ident(f.Name))
		} else {
			tables = append(tables, bun.Ident(f.Name))
		}
	}
	if len(views) > 0 {
		if _, err := conn.NewRaw("DROP VIEW IF EXISTS ?", bun.List(views)).Exec(ctx); err != nil {
			return fmt.Errorf("drop views: %w", err)
		}
	}
	if len(tables) > 0 {
		if _, err := conn.NewRaw(dropTables, bun.List(tables)).Exec(ctx); err != nil {
			return fmt.Errorf("drop tables: %w", err)
		}
	}
	return nil
}
