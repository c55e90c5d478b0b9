package dbtest

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

// PostgresListener listens through bun's pgdriver on db (as Postgres opens
// it), for the wake-up tests of this module: the same as the pglisten
// module's pgdriverlisten, which this module cannot import (that module
// requires this one). Another driver's *bun.DB gets ErrNoListener.
func PostgresListener(db *bun.DB) postgres.ListenFunc {
	return func(context.Context) (postgres.Listener, error) {
		if _, ok := db.Driver().(pgdriver.Driver); !ok {
			return nil, fmt.Errorf("%w: dbtest.PostgresListener needs a *bun.DB opened with pgdriver", postgres.ErrNoListener)
		}
		return &pgdriverListener{ln: pgdriver.NewListener(db)}, nil
	}
}

type pgdriverListener struct {
	ln        *pgdriver.Listener
	closeOnce sync.Once
	closeErr  error
}

func (l *pgdriverListener) Listen(ctx context.Context, channels ...string) error {
	return l.ln.Listen(ctx, channels...)
}

// Receive maps ctx onto pgdriver, whose read only a timeout or a closed
// connection ends.
func (l *pgdriverListener) Receive(ctx context.Context) (channel, payload string, err error) {
	var timeout time.Duration // none
	if deadline, ok := ctx.Deadline(); ok {
		if timeout = time.Until(deadline); timeout <= 0 {
			return "", "", context.DeadlineExceeded
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
		return "", "", fmt.Errorf("%w: %w", ctx.Err(), err)
	case timeout > 0 && errors.As(err, &ne) && ne.Timeout():
		return "", "", fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return "", "", err
}

func (l *pgdriverListener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.ln.Close() })
	return l.closeErr
}
