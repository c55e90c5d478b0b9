package postgres

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

var (
	_ dialect.WakeupListener = (*Dialect)(nil)
	_ dialect.WakeupNotifier = (*Dialect)(nil)
)

// ListenWakeups listens on the channels NotifyWakeups sends on ({incoming}
// and {outgoing}: the sender, then the partition ids), on a connection of
// its own (bun's pgdriver listener, or a pool connection held while it
// listens with pgx's stdlib driver), and skips what its own process sent.
// A broken connection is dropped and a new one listens after a backoff;
// Listening is called on every (re)connect, since notifications sent
// meanwhile are lost (docs/ARCHITECTURE.md, "Wake-ups across processes").
func (d *Dialect) ListenWakeups(ctx context.Context, self string, w dialect.Wakeups) error {
	incoming, outgoing := d.Tables().Incoming, d.Tables().Outgoing
	once := d.listenOnce
	if _, ok := d.DB().Driver().(pgdriver.Driver); !ok {
		once = d.listenPgx
	}
	for failures := 0; ; {
		err := once(ctx, self, w, incoming, outgoing)
		if errors.Is(err, dialect.ErrNoListener) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		failures++
		if err == nil {
			failures = 0 // heard something before it broke: start the backoff over
		}
		if !lifecycle.Sleep(ctx, lifecycle.Backoff(max(failures, 1), 100*time.Millisecond, 10*time.Second)) {
			return nil
		}
	}
}

// listenOnce runs one listener connection until it breaks or ctx ends; it
// returns nil if it heard anything.
func (d *Dialect) listenOnce(ctx context.Context, self string, w dialect.Wakeups, incoming, outgoing string) error {
	ln := pgdriver.NewListener(d.DB())
	// A blocked read ignores ctx (only its deadline ends it): closing the
	// listener's connection is what ends a wait at Stop.
	closed := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-closed:
		}
		_ = ln.Close()
	}()
	defer close(closed)
	if err := ln.Listen(ctx, incoming, outgoing); err != nil {
		return err
	}
	l := &listening{self: self, w: w, incoming: incoming, outgoing: outgoing}
	d.probe(ctx, l)
	heard := false
	for {
		channel, payload, err := ln.ReceiveTimeout(ctx, l.wait())
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil:
			if !l.ready {
				d.probe(ctx, l) // sent before LISTEN took effect: again
			}
			continue
		case heard:
			return nil
		default:
			return err
		}
		heard = true
		l.handle(channel, payload)
	}
}

// senderEnd ends the sender's name in a payload: a control character,
// which an instance name (printable ASCII) never holds.
const senderEnd = "\x1f"

// pgxConn is what pgx's database/sql driver connection offers.
type pgxConn interface{ Conn() *pgx.Conn }

// listenPgx is listenOnce on a pool connection of pgx's stdlib driver,
// held for as long as it listens and unlistened before it goes back.
func (d *Dialect) listenPgx(ctx context.Context, self string, w dialect.Wakeups, incoming, outgoing string) error {
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		unlisten, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = conn.ExecContext(unlisten, "UNLISTEN *")
		_ = conn.Close()
	}()
	heard := false
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConn)
		if !ok {
			return dialect.ErrNoListener
		}
		c := pc.Conn()
		for _, ch := range []string{incoming, outgoing} {
			if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
		}
		l := &listening{self: self, w: w, incoming: incoming, outgoing: outgoing}
		d.probe(ctx, l)
		for {
			waitCtx, cancel := context.WithTimeout(ctx, l.wait())
			n, err := c.WaitForNotification(waitCtx)
			cancel()
			if err != nil {
				if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !c.IsClosed() {
					if !l.ready {
						d.probe(ctx, l)
					}
					continue
				}
				return err
			}
			heard = true
			l.handle(n.Channel, n.Payload)
		}
	})
	if heard && !errors.Is(err, dialect.ErrNoListener) {
		return nil
	}
	return err
}

// listening is one listener connection's state.
type listening struct {
	self               string
	w                  dialect.Wakeups
	incoming, outgoing string
	ready              bool
}

// readyProbe is the payload a listener sends itself, until one comes back,
// once it has issued LISTEN: LISTEN takes effect when the server has run
// it, which the driver does not wait for, so Listening (and the scan for
// missed work it triggers) waits for a probe to come back.
const readyProbe = "ready"

// wait is how long to wait for a notification: briefly until the probe
// has come back (it is sent again each time), then a minute.
func (l *listening) wait() time.Duration {
	if l.ready {
		return time.Minute
	}
	return 50 * time.Millisecond
}

// probe sends the ready probe; if it cannot, Listening is called at once.
func (d *Dialect) probe(ctx context.Context, l *listening) {
	_, err := d.Raw(d.DB(), "SELECT pg_notify(?, ?)", l.incoming, l.self+senderEnd+readyProbe).Exec(ctx)
	if err != nil {
		l.ready = true
		l.w.Listening()
	}
}

// handle hands one notification to w, unless this process sent it; its
// own ready probe marks the connection listening.
func (l *listening) handle(channel, payload string) {
	sender, list, _ := strings.Cut(payload, senderEnd)
	if list == readyProbe {
		if sender == l.self && !l.ready {
			l.ready = true
			l.w.Listening()
		}
		return // another process's probe is not news
	}
	if sender == l.self {
		return // this process knows already
	}
	ids := parseIDs(list)
	switch channel {
	case l.incoming:
		l.w.Incoming(ids)
	case l.outgoing:
		l.w.Sequenced(ids)
	}
}

// parseIDs reads "12,13,40"; "*", or anything unreadable, is nil: all.
func parseIDs(payload string) []int64 {
	if payload == "" || payload == "*" {
		return nil
	}
	parts := strings.Split(payload, ",")
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil
		}
		ids = append(ids, id)
	}
	return ids
}

// NotifyWakeups tells listening processes which partitions got incoming
// or sequenced rows, as self: one statement, outside any caller's
// transaction. (A notification sent inside the producer's transaction would
// take PostgreSQL's database-wide notify lock through that transaction's
// commit: measured, single-message enqueues from 8 producers fell from
// 4,382 to 1,035 msgs/s.)
func (d *Dialect) NotifyWakeups(ctx context.Context, self string, incoming, sequenced []int64) error {
	var args []any
	q := "SELECT 1"
	for _, n := range []struct {
		channel string
		ids     []int64
	}{{d.Tables().Incoming, incoming}, {d.Tables().Outgoing, sequenced}} {
		if len(n.ids) > 0 {
			q += ", pg_notify(?, ?)"
			args = append(args, n.channel, self+senderEnd+payloadOf(n.ids))
		}
	}
	if len(args) == 0 {
		return nil
	}
	_, err := d.Raw(d.DB(), q, args...).Exec(ctx)
	return d.Wrap(err)
}

// payloadOf lists ids, or "*" past what one notification carries.
func payloadOf(ids []int64) string {
	b := make([]byte, 0, 8*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
		if len(b) > 7000 {
			return "*"
		}
	}
	return string(b)
}
