// Package pgdriverlisten lets seqbox's PostgreSQL dialect hear other
// processes' wake-ups (LISTEN/NOTIFY) through bun's pgdriver: pass New's
// ListenFunc to postgres.WithListener. Each listener is a
// pgdriver.Listener on a connection of its own, opened with the settings
// of the application's *bun.DB and held while the outbox runs. That
// *bun.DB must be opened with pgdriver (sql.OpenDB(pgdriver.NewConnector(…)));
// with another driver use pgxlisten.
package pgdriverlisten

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/seqbox/seqbox/dialect/postgres"
)

// New returns a ListenFunc that opens a pgdriver listener with db's
// connection settings for each listener. If db was not opened with
// pgdriver, it reports so once, when the outbox starts, as an error
// matching postgres.ErrNoListener.
func New(db *bun.DB) postgres.ListenFunc {
	if db == nil {
		err := fmt.Errorf("pgdriverlisten: %w: nil *bun.DB", postgres.ErrNoListener)
		return func(context.Context) (postgres.Listener, error) { return nil, err }
	}
	if _, ok := db.Driver().(pgdriver.Driver); !ok {
		err := fmt.Errorf("pgdriverlisten: %w: the *bun.DB was opened with %T, not bun's pgdriver (use pgxlisten)",
			postgres.ErrNoListener, db.Driver())
		return func(context.Context) (postgres.Listener, error) { return nil, err }
	}
	return func(context.Context) (postgres.Listener, error) {
		return &listener{ln: pgdriver.NewListener(db)}, nil // it connects in Listen
	}
}

// listener is a postgres.Listener on one pgdriver.Listener.
type listener struct {
	ln        *pgdriver.Listener
	closeOnce sync.Once
	closeErr  error
}

// Listen sends LISTEN for each channel (connecting first); pgdriver does
// not wait for the server to have run it.
func (l *listener) Listen(ctx context.Context, channels ...string) error {
	if err := l.ln.Listen(ctx, channels...); err != nil {
		return fmt.Errorf("pgdriverlisten: listen: %w", err)
	}
	return nil
}

// Receive maps ctx onto pgdriver, whose read only a timeout or a closed
// connection ends: ctx's deadline becomes the read's timeout (which keeps
// the connection), and a cancellation closes the connection.
func (l *listener) Receive(ctx context.Context) (channel, payload string, err error) {
	var timeout time.Duration // none
	if deadline, ok := ctx.Deadline(); ok {
		if timeout = time.Until(deadline); timeout <= 0 {
			return "", "", fmt.Errorf("pgdriverlisten: receive: %w", context.DeadlineExceeded)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			_ = l.Close() // canceled: end the read
		}
	})
	defer stop()
	channel, payload, err = l.ln.ReceiveTimeout(ctx, timeout)
	var ne net.Error
	switch {
	case err == nil:
		return channel, payload, nil
	case ctx.Err() != nil:
		return "", "", fmt.Errorf("pgdriverlisten: receive: %w: %w", ctx.Err(), err)
	case timeout > 0 && errors.As(err, &ne) && ne.Timeout():
		return "", "", fmt.Errorf("pgdriverlisten: receive: %w: %w", context.DeadlineExceeded, err)
	}
	return "", "", fmt.Errorf("pgdriverlisten: receive: %w", err)
}

// Close closes the connection; later calls return the first one's result.
func (l *listener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.ln.Close() })
	return l.closeErr
}
