package seqbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbtest"
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
	adm, err := seqbox.NewAdmin(db, "app_")
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
		"nil queue option":      seqbox.New(db).Queue("q", 1, noop, nil),
		"nil default option":    seqbox.New(db).QueueDefaults(nil).Queue("q", 1, noop),
		"nil leased function":   seqbox.New(db).Queue("q", 1, processor.Leased(nil)),
		"nil tx function":       seqbox.New(db).Queue("q", 1, processor.Transactional(nil)),
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
