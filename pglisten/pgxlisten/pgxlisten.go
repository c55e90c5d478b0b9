// Package pgxlisten lets seqbox's PostgreSQL dialect hear other processes'
// wake-ups (LISTEN/NOTIFY) through pgx: pass New's ListenFunc to
// postgres.WithListener. Each listener is a *pgx.Conn of its own, opened
// with pgx.Connect and held while the outbox runs, so it works whatever
// driver the application's *bun.DB uses (pgx's stdlib, bun's pgdriver,
// lib/pq); it is the one to pick unless the application links only
// pgdriver (then pgdriverlisten saves linking pgx).
package pgxlisten

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seqbox/seqbox/dialect/postgres"
)

// closeTimeout bounds Close: it tells the server goodbye, and a server
// that is gone must not hold up the outbox's Stop.
const closeTimeout = time.Second

// New returns a ListenFunc that connects to connString (a pgx connection
// string: a URL or key=value pairs, as pgx.ParseConfig reads it) for each
// listener. A connString pgx cannot parse is reported once, when the
// outbox starts, as an error matching postgres.ErrNoListener: retrying
// would not help.
func New(connString string) postgres.ListenFunc {
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		err = fmt.Errorf("pgxlisten: %w: %w", postgres.ErrNoListener, err)
		return func(context.Context) (postgres.Listener, error) { return nil, err }
	}
	return FromConfig(config)
}

// FromConfig is New with a parsed configuration (pgx.ParseConfig's, maybe
// edited: TLS, a dialer, runtime parameters). Each listener connects with
// a copy of config as it is when FromConfig is called.
func FromConfig(config *pgx.ConnConfig) postgres.ListenFunc {
	if config == nil {
		err := fmt.Errorf("pgxlisten: %w: nil *pgx.ConnConfig", postgres.ErrNoListener)
		return func(context.Context) (postgres.Listener, error) { return nil, err }
	}
	config = config.Copy()
	return func(ctx context.Context) (postgres.Listener, error) {
		conn, err := pgx.ConnectConfig(ctx, config)
		if err != nil {
			return nil, fmt.Errorf("pgxlisten: connect: %w", err)
		}
		return &listener{conn: conn}, nil
	}
}

// listener is a postgres.Listener on one pgx connection.
type listener struct {
	conn *pgx.Conn
}

// Listen runs LISTEN for each channel; pgx waits for the server to have
// run it.
func (l *listener) Listen(ctx context.Context, channels ...string) error {
	for _, ch := range channels {
		if _, err := l.conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("pgxlisten: listen %s: %w", ch, err)
		}
	}
	return nil
}

// Receive waits for a notification. pgx ends the wait when ctx ends and
// keeps the connection after a deadline, as postgres.Listener requires.
func (l *listener) Receive(ctx context.Context) (channel, payload string, err error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", "", fmt.Errorf("pgxlisten: receive: %w", err)
	}
	if n == nil { // not seen from pgx: a notification-less success
		return "", "", errors.New("pgxlisten: receive: no notification")
	}
	return n.Channel, n.Payload, nil
}

// Close closes the connection.
func (l *listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return l.conn.Close(ctx)
}
