package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestClassifiesDriverErrors: the errors the server raises reach the
// dialect as each driver's own type (pgdriver.Error with Field('C'), pgx's
// *pgconn.PgError with SQLState()), and the dialect, importing neither,
// reads their SQLSTATE.
func TestClassifiesDriverErrors(t *testing.T) {
	t.Parallel()
	pgdriverDB := dbtest.Postgres(t)
	sqldb, err := sql.Open("pgx", dbtest.PostgresDSN())
	require.NoError(t, err)
	pgxDB := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = pgxDB.Close() })

	for _, drv := range []struct {
		name   string
		db     *bun.DB
		isType func(error) bool
	}{
		{"pgdriver", pgdriverDB, func(err error) bool { var e pgdriver.Error; return errors.As(err, &e) }},
		{"pgx", pgxDB, func(err error) bool { var e *pgconn.PgError; return errors.As(err, &e) }},
	} {
		t.Run(drv.name, func(t *testing.T) {
			d, err := postgres.New(drv.db, dialect.DefaultPrefix)
			require.NoError(t, err)
			for _, tt := range []struct {
				code                 string
				retryable, transient bool
			}{
				{"40001", true, true},   // serialization failure
				{"40P01", true, true},   // deadlock
				{"55P03", true, true},   // lock not available
				{"57P01", false, true},  // terminated by an administrator
				{"08006", false, true},  // connection failure
				{"23505", false, false}, // unique violation
			} {
				_, err := drv.db.NewRaw("DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '" + tt.code + "'; END $$").
					Exec(context.Background())
				require.Error(t, err, tt.code)
				require.True(t, drv.isType(err), "%s: %T is not %s's error type", tt.code, err, drv.name)
				require.Equal(t, tt.retryable, d.IsRetryable(err), "%s retryable: %v", tt.code, err)
				require.Equal(t, tt.transient, d.IsTransient(err), "%s transient: %v", tt.code, err)
				if tt.retryable {
					require.ErrorIs(t, d.(interface{ Wrap(error) error }).Wrap(err), dialect.ErrRetryable)
				}
			}
		})
	}
}
