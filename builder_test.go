package seqbox_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/relaytest"
	"github.com/seqbox/seqbox/processor"
)

func TestMigrationsWithBunMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	m := migrate.NewMigrator(db, seqbox.Migrations("app_"),
		migrate.WithTableName("app_migrations"), migrate.WithLocksTableName("app_migration_locks"), migrate.WithMarkAppliedOnSuccess(true))
	require.NoError(t, m.Init(ctx))
	_, err := m.Migrate(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident("app_schema_version")).Scan(ctx, &n))
	adm, err := seqbox.NewAdmin(context.Background(), db, "app_")
	require.NoError(t, err)
	st, err := adm.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, st.Latest, n, "every SQLite schema version applied")
	require.Equal(t, st.Latest, st.Version)
	// The schema is usable without Migrate(true).
	ob, err := seqbox.New(db).TablePrefix("app_").Queue("q", 2, nil).Start(ctx)
	require.NoError(t, err)
	require.NoError(t, ob.Stop(ctx))
	_, err = m.Rollback(ctx)
	require.NoError(t, err)
	require.Error(t, db.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident("app_body")).Scan(ctx, &n), "tables dropped")
}

// TestMigrationsListEverySchemaChange: Migrations has one entry per schema
// change of any dialect (their migration files after 001_init, by name),
// beside the first. A change without an entry never reaches an application
// whose bun migrator ran the list before it: nothing new would call
// SchemaMigrate.
func TestMigrationsListEverySchemaChange(t *testing.T) {
	t.Parallel()
	changes := map[string]bool{}
	for _, dir := range []string{"dialect/postgres/migration", "dialect/mysql/migration", "dialect/sqlite/migration"} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			number, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
			require.True(t, ok, e.Name())
			if number > "001" {
				changes[name] = true
			}
		}
	}
	require.NotEmpty(t, changes)
	require.Len(t, seqbox.Migrations("app_").Sorted(), 1+len(changes), "schema changes: %v", changes)
}

func TestBuilderNilDB(t *testing.T) {
	t.Parallel()
	_, err := seqbox.New(nil).Start(context.Background())
	require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
}

// TestBuilderMisuseIsAnError: nil options, a
// handler built from a nil function and an unstorable instance id are
// configuration errors from Start, never panics.
func TestBuilderMisuseIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	noop := processor.Leased(func(context.Context, processor.Delivery) error { return nil })
	for name, b := range map[string]*seqbox.Builder{
		"nil queue option":           seqbox.New(db).Queue("q", 1, noop, nil),
		"nil default option":         seqbox.New(db).QueueDefaults(nil).Queue("q", 1, noop),
		"nil leased function":        seqbox.New(db).Queue("q", 1, processor.Leased(nil)),
		"nil tx function":            seqbox.New(db).Queue("q", 1, processor.Transactional(nil)),
		"non-ASCII instance id":      seqbox.New(db).InstanceID("host-\x00-é").Queue("q", 1, noop),
		"nil db":                     seqbox.New(nil).Queue("q", 1, noop),
		"postgres options on sqlite": seqbox.New(db).PostgresOptions(postgres.WithListener(func(context.Context) (postgres.Listener, error) { return nil, nil })).Queue("q", 1, noop),
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = b.Migrate(true).Start(ctx) })
			require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
		})
	}
}

// TestBuilderChecksSynchronousCommit: a synchronous_commit for seqbox's
// own transactions that PostgreSQL would not take is a configuration error
// from Start, naming PostgresOptions, before anything is written.
func TestBuilderChecksSynchronousCommit(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	_, err := seqbox.New(db).TablePrefix(dbtest.Prefix(t)).Migrate(true).
		PostgresOptions(postgres.WithSynchronousCommit("sometimes")).
		Queue("q", 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).Start(t.Context())
	require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
	var ce *seqbox.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "PostgresOptions", ce.Field)
	require.Contains(t, ce.Error(), `"sometimes"`)
}

// TestPostgresWithoutListenerSaysSo: on PostgreSQL without a listener,
// Start logs that wake-ups from other processes are off and how to turn
// them on.
func TestPostgresWithoutListenerSaysSo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.Postgres(t)
	prefix := dbtest.Prefix(t)
	d, err := dialects.Open(context.Background(), db, prefix)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{}) })
	var logs dbtest.SyncBuffer
	ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(slog.New(slog.NewTextHandler(&logs, nil))).
		Queue("q", 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).Start(ctx)
	require.NoError(t, err)
	defer func() { _ = ob.Stop(context.Background()) }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "wake-ups from other processes are off") },
		30*time.Second, 10*time.Millisecond, "a failure bound: it is logged as the outbox starts")
	require.Contains(t, logs.String(), "postgres.WithListener")
}

// TestAdminWithMySQLDown: the entry points that work without a pipeline
// do not wait for the database as Start does; with MySQL/MariaDB
// unreachable they fail at once, saying so. A proxy that refuses every
// connection stands for the server.
func TestAdminWithMySQLDown(t *testing.T) {
	t.Parallel()
	target, openAt, ok := dbtest.Server(t, dialect.MySQL)
	if !ok {
		t.Skip("SEQBOX_MYSQL_DSN does not reach the server over TCP")
	}
	proxy := relaytest.NewProxy(t, target)
	proxy.Down()
	db := openAt(proxy.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure bound
	defer cancel()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"NewAdmin", func() error { _, err := seqbox.NewAdmin(ctx, db, "app_"); return err }},
	} {
		err := c.call()
		require.Error(t, err, c.name)
		require.NoError(t, ctx.Err(), "%s waited for the database", c.name)
		require.ErrorContains(t, err, "seqbox: MySQL/MariaDB unreachable", c.name)
	}
	require.Positive(t, proxy.Refused())
}
