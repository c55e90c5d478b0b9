package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/outbox"
)

// TestOutboxTransactionsReadCommitted: the transactions the outbox opens
// for the application (Outbox.Transaction, Enqueue given a *bun.DB or an
// *sql.DB) are READ COMMITTED like its own ("Tables and locks"), whether
// the connections default to REPEATABLE READ (the server's default) or
// already to READ COMMITTED (the dialect then sends no SET TRANSACTION).
func TestOutboxTransactionsReadCommitted(t *testing.T) {
	t.Parallel()
	for _, sessionDefault := range []string{"REPEATABLE-READ", "READ-COMMITTED"} {
		// One after the other: InnoDB refreshes innodb_trx only after
		// 100 ms without a reader, and two tests polling it in turn can
		// keep it stale until the lock wait times out (seen: 50 s).
		t.Run(sessionDefault, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
			defer cancel()
			db := openIsolated(ctx, t, sessionDefault)
			prefix := dbtest.Prefix(t)
			ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).ProducerOnly().Queue("iso", 1, nil).Start(ctx)
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = ob.Stop(context.Background())
				if d, err := dialects.Open(context.Background(), db, prefix); err == nil {
					_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
				}
			})

			// Enqueue's transaction is out of reach, and innodb_trx is a copy
			// refreshed at most every 100 ms, so a transaction may not find
			// itself there: each is made to wait for a dedup key that an open
			// transaction holds, and its level is read from another
			// connection meanwhile.
			msg := func(key string) outbox.Message { return outbox.Message{PayloadType: "t", DedupKey: key} }
			paths := map[string]func(key string) error{
				"Outbox.Transaction": func(key string) error {
					return ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
						_, err := ob.Enqueue(ctx, tx, "iso", msg(key))
						return err
					})
				},
				"Enqueue on a *bun.DB":  func(key string) error { _, err := ob.Enqueue(ctx, db, "iso", msg(key)); return err },
				"Enqueue on an *sql.DB": func(key string) error { _, err := ob.Enqueue(ctx, db.DB, "iso", msg(key)); return err },
			}
			for name, enqueue := range paths {
				key := "held by " + name
				holder, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				_, err = ob.Enqueue(ctx, holder, "iso", msg(key))
				require.NoError(t, err)
				done := make(chan error, 1)
				go func() { done <- enqueue(key) }()
				level := waitingLevel(ctx, t, db, prefix+"dedup_keys", done)
				require.NoError(t, holder.Rollback())
				require.NoError(t, <-done)
				assert.Equal(t, "READ COMMITTED", level, name)
			}
		})
	}
}

// waitingLevel polls for the transaction waiting for a lock on table (the
// name is unique to the test) and returns its isolation level.
func waitingLevel(ctx context.Context, t *testing.T, db *bun.DB, table string, done <-chan error) string {
	t.Helper()
	for {
		var level string
		err := db.NewRaw("SELECT trx_isolation_level FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
			"%"+table+"%").Scan(ctx, &level)
		if err == nil {
			return level
		}
		require.ErrorIs(t, err, sql.ErrNoRows)
		select {
		case err := <-done:
			t.Fatalf("the enqueue ended without waiting for the held key: %v", err)
		case <-ctx.Done():
			t.Fatalf("no transaction waited for the held key: %v", ctx.Err())
		// Not sooner: InnoDB refreshes the table only when nobody has
		// read it for 100 ms.
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// openIsolated opens the test database with every connection's default
// isolation set to level, and checks that it took.
func openIsolated(ctx context.Context, t *testing.T, level string) *bun.DB {
	t.Helper()
	probe := dbtest.MySQL(t)
	var version string
	require.NoError(t, probe.NewRaw("SELECT VERSION()").Scan(ctx, &version))
	variable := "transaction_isolation"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		variable = "tx_isolation" // transaction_isolation only from MariaDB 11.1
	}
	cfg, err := gomysql.ParseDSN(dbtest.MySQLDSN())
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[variable] = "'" + level + "'" // sent as SET on every new connection
	sqldb, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	db := bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	t.Cleanup(func() { _ = db.Close() })
	var got string
	require.NoError(t, db.NewRaw("SELECT @@"+variable).Scan(ctx, &got))
	if !strings.EqualFold(got, level) {
		t.Fatalf("the connections' default isolation is %s, not %s", got, level)
	}
	return db
}
