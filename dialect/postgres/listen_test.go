package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
)

func TestNewRejectsNilOptions(t *testing.T) {
	t.Parallel()
	_, err := postgres.New(nil, dialect.DefaultPrefix, postgres.Option{}) // New does not touch the database
	require.Error(t, err)
	_, err = postgres.New(nil, dialect.DefaultPrefix, postgres.WithListener(nil))
	require.Error(t, err)
}

// TestListenWakeupsNeedsAListener: without WithListener, or with a
// ListenFunc that can never listen, ListenWakeups returns at once with
// ErrNoListener (the outbox then logs that it polls), never retrying.
func TestListenWakeupsNeedsAListener(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(nil, dialect.DefaultPrefix)
	require.NoError(t, err)
	require.ErrorIs(t, d.(dialect.WakeupListener).ListenWakeups(t.Context(), "me", dialect.Wakeups{}), dialect.ErrNoListener)

	var calls atomic.Int32
	never := func(context.Context) (postgres.Listener, error) {
		calls.Add(1)
		return nil, errors.Join(postgres.ErrNoListener, errors.New("another driver"))
	}
	d, err = postgres.New(nil, dialect.DefaultPrefix, postgres.WithListener(never))
	require.NoError(t, err)
	require.ErrorIs(t, d.(dialect.WakeupListener).ListenWakeups(t.Context(), "me", dialect.Wakeups{}), dialect.ErrNoListener)
	require.Equal(t, int32(1), calls.Load())
}

// TestListenWakeupsRetriesTheListenFunc: a ListenFunc that fails is
// called again (after a backoff) until a listener connects; Listening then
// says so, and ListenWakeups returns nil when its context ends.
func TestListenWakeupsRetriesTheListenFunc(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	inner := dbtest.PostgresListener(db)
	var calls atomic.Int32
	flaky := func(ctx context.Context) (postgres.Listener, error) {
		if calls.Add(1) <= 2 {
			return nil, errors.New("connection refused")
		}
		return inner(ctx)
	}
	d, err := postgres.New(db, dbtest.Prefix(t), postgres.WithListener(flaky))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- d.(dialect.WakeupListener).ListenWakeups(ctx, "me", dialect.Wakeups{
			Incoming: func([]int64) {}, Sequenced: func([]int64) {},
			Listening: func() { listening <- struct{}{} },
		})
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second): // a failure bound
		t.Fatal("no listener connected")
	}
	require.Equal(t, int32(3), calls.Load())
	cancel()
	require.NoError(t, <-done)
}
