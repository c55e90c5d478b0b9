package postgres

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// sqlStateError is shaped like pgx's and lib/pq's errors.
type sqlStateError struct{ code string }

func (e sqlStateError) Error() string    { return "pg error " + e.code }
func (e sqlStateError) SQLState() string { return e.code }

// fieldError is shaped like pgdriver's error.
type fieldError struct{ code string }

func (e fieldError) Error() string { return "pg error" }
func (e fieldError) Field(k byte) string {
	if k == 'C' {
		return e.code
	}
	return "not the code"
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"SQLState serialization failure", sqlStateError{"40001"}, true},
		{"SQLState deadlock", sqlStateError{"40P01"}, true},
		{"SQLState lock not available", sqlStateError{"55P03"}, true},
		{"SQLState unique violation", sqlStateError{"23505"}, false},
		{"wrapped SQLState", fmt.Errorf("insert: %w", sqlStateError{"40001"}), true},
		{"Field serialization failure", fieldError{"40001"}, true},
		{"Field deadlock", fieldError{"40P01"}, true},
		{"Field unique violation", fieldError{"23505"}, false},
		{"wrapped Field", fmt.Errorf("insert: %w", fieldError{"40P01"}), true},
		{"pgx serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"wrapped pgx deadlock", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "40P01"}), true},
		{"pgx unique violation", &pgconn.PgError{Code: "23505"}, false},
		// The code must come from the driver, not from the message text.
		{"plain error naming the code", errors.New("ERROR: could not serialize access (SQLSTATE 40001)"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, isRetryable(tt.err))
		})
	}
}

// TestDialectIsRetryable checks the dialect also honours errors already
// marked with dialect.ErrRetryable (New does not touch the database).
func TestDialectIsRetryable(t *testing.T) {
	t.Parallel()
	dd, err := New(nil, dialect.DefaultPrefix)
	d := dd.(*pgDialect)
	require.NoError(t, err)
	require.True(t, d.IsRetryable(sqlStateError{"40001"}))
	require.True(t, d.IsRetryable(fmt.Errorf("%w: x", dialect.ErrRetryable)))
	require.False(t, d.IsRetryable(sqlStateError{"23505"}))
	require.ErrorIs(t, d.Wrap(sqlStateError{"40P01"}), dialect.ErrRetryable)
	require.NotErrorIs(t, d.Wrap(sqlStateError{"23505"}), dialect.ErrRetryable)
}

func TestIsDisconnect(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{sqlStateError{"57P01"}, true}, // pg_terminate_backend
		{fieldError{"08006"}, true},    // connection failure
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{driver.ErrBadConn, true},
		{sqlStateError{"23505"}, false},
		{errors.New("syntax error"), false},
	} {
		require.Equal(t, tt.want, isDisconnect(tt.err), "%v", tt.err)
	}
}
