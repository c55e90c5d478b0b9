package seqbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
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
	d, err := seqbox.Dialect(ctx, db, "app_")
	require.NoError(t, err)
	st, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st.Latest, n, "every SQLite schema version applied")
	require.Equal(t, st.Latest, st.Current)
	// The schema is usable without Migrate(true).
	ob, err := seqbox.New(db).TablePrefix("app_").Queue("q", 2, nil).Start(ctx)
	require.NoError(t, err)
	require.NoError(t, ob.Stop(ctx))
	_, err = m.Rollback(ctx)
	require.NoError(t, err)
	require.Error(t, db.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident("app_body")).Scan(ctx, &n), "tables dropped")
}

func TestBuilderConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := seqbox.New(nil).Queue("q", 3, nil, processor.BatchSize(7)).QueueDefaults(processor.MaxAttempts(processor.MaxAttemptsNever)).Config()
	require.Len(t, cfg.Queues, 1)
	require.Equal(t, 7, cfg.Queues[0].Options.BatchSize)
	require.Equal(t, processor.MaxAttemptsNever, cfg.Queues[0].Options.MaxAttempts, "QueueDefaults apply to every queue")
	require.Equal(t, processor.RetryBaseDefault, cfg.Queues[0].Options.RetryBase)
	require.Equal(t, 64<<10, cfg.MaxPayloadBytes)
	require.Equal(t, 1000, cfg.Sequencer.BatchSize)
	require.Zero(t, cfg.Sequencer.Workers, "left to Start, which picks the database's default")
	require.Equal(t, 3, seqbox.New(nil).SequencerWorkers(3).Config().Sequencer.Workers)
	_, err := seqbox.New(nil).Start(context.Background())
	require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
}

// TestBuilderMisuseIsAnError: nil options, a nil Configure function, a
// handler built from a nil function and an unstorable instance id are
// configuration errors from Start, never panics.
func TestBuilderMisuseIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	noop := processor.Leased(func(context.Context, processor.Delivery) error { return nil })
	for name, b := range map[string]*seqbox.Builder{
		"nil queue option":      seqbox.New(db).Queue("q", 1, noop, nil),
		"nil default option":    seqbox.New(db).QueueDefaults(nil).Queue("q", 1, noop),
		"nil Configure":         seqbox.New(db).Configure(nil).Queue("q", 1, noop),
		"nil leased function":   seqbox.New(db).Queue("q", 1, processor.Leased(nil)),
		"nil tx function":       seqbox.New(db).Queue("q", 1, processor.Transactional(nil)),
		"zero Handler":          seqbox.New(db).Queue("q", 1, &processor.Handler{}),
		"non-ASCII instance id": seqbox.New(db).InstanceID("host-\x00-é").Queue("q", 1, noop),
		"nil db":                seqbox.New(nil).Queue("q", 1, noop),
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = b.Migrate(true).Start(ctx) })
			require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
		})
	}
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
		{"DeadLetters", func() error { _, err := seqbox.DeadLetters(ctx, db, "app_"); return err }},
		{"Partitions", func() error { _, err := seqbox.Partitions(ctx, db, "app_"); return err }},
		{"Stats", func() error { _, err := seqbox.Stats(ctx, db, "app_"); return err }},
	} {
		err := c.call()
		require.Error(t, err, c.name)
		require.NoError(t, ctx.Err(), "%s waited for the database", c.name)
		require.ErrorContains(t, err, "seqbox: MySQL/MariaDB unreachable", c.name)
	}
	require.Positive(t, proxy.Refused())
}
