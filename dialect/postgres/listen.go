package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// wakeups is the notifications' statements. The channels are the
// {incoming} and {outgoing} table names (quoted here as text values, as
// ListenWakeups listens on them); a payload is the sender, senderEnd, and
// the partition ids. A notification goes out as soon as its statement
// commits: outside any caller's transaction, each statement is its own.
type wakeups struct {
	// Incoming, Sequenced and Both send ?incoming, ?sequenced or both, in
	// one statement whatever NotifyWakeups has to say.
	Incoming  *kit.Stmt
	Sequenced *kit.Stmt
	Both      *kit.Stmt
	// Probe sends the ready probe ?probe on the incoming channel.
	Probe *kit.Stmt
}

var wakeupSQL = wakeups{
	Incoming:  kit.Inline(`SELECT pg_notify('{incoming}', ?incoming)`),
	Sequenced: kit.Inline(`SELECT pg_notify('{outgoing}', ?sequenced)`),
	Both:      kit.Inline(`SELECT pg_notify('{incoming}', ?incoming), pg_notify('{outgoing}', ?sequenced)`),
	Probe:     kit.Inline(`SELECT pg_notify('{incoming}', ?probe)`),
}

// Listener is one dedicated connection that listens for notifications
// (LISTEN), through whichever driver the application uses: the module
// github.com/seqbox/seqbox/pglisten has one for pgx and one for bun's
// pgdriver. The dialect uses a Listener from one goroutine at a time.
type Listener interface {
	// Listen subscribes the connection to channels. It may return before
	// the server has run LISTEN: the dialect waits for a notification of
	// its own to come back before it counts on hearing anything.
	Listen(ctx context.Context, channels ...string) error
	// Receive waits for the next notification on a subscribed channel.
	// When ctx ends first it returns an error matching ctx's (errors.Is),
	// and after a deadline the connection must still be usable. Any other
	// error means the connection is lost: the dialect closes the Listener
	// and opens another.
	Receive(ctx context.Context) (channel, payload string, err error)
	// Close closes the connection. The dialect calls it once, after its
	// last Listen or Receive has returned.
	Close() error
}

// ListenFunc opens a Listener on a new connection of its own: one outside
// the application's pool, since it is held for as long as the outbox
// runs. The dialect calls it again, after a backoff, whenever a Listener
// fails. An error matching ErrNoListener means it never can: the dialect
// stops listening and other processes' work is found by polling.
type ListenFunc func(ctx context.Context) (Listener, error)

// ErrNoListener is dialect.ErrNoListener, for a ListenFunc to report that
// it cannot listen at all (the *bun.DB it was given has another driver).
var ErrNoListener = dialect.ErrNoListener

// errNoListenFunc is what ListenWakeups reports without WithListener; the
// outbox logs it at Start, so it says how to turn wake-ups on.
var errNoListenFunc = fmt.Errorf("%w: no listener was configured; pass postgres.WithListener "+
	"with pgxlisten.New or pgdriverlisten.New (module github.com/seqbox/seqbox/pglisten)", dialect.ErrNoListener)

// ListenWakeups listens on the channels NotifyWakeups sends on ({incoming}
// and {outgoing}: the sender, then the partition ids), through the
// Listener WithListener opens, and skips what its own process sent.
// Without WithListener it returns an error matching dialect.ErrNoListener
// at once. A broken connection is dropped and a new one listens after a
// backoff; Listening is called on every (re)connect, since notifications
// sent meanwhile are lost (docs/ARCHITECTURE.md, "Wake-ups across
// processes").
func (d *pgDialect) ListenWakeups(ctx context.Context, self string, w dialect.Wakeups) error {
	if d.listen == nil {
		return errNoListenFunc
	}
	for failures := 0; ; {
		err := d.listenOnce(ctx, self, w)
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

// listenOnce runs one Listener until it breaks or ctx ends; it returns nil
// if it heard anything.
func (d *pgDialect) listenOnce(ctx context.Context, self string, w dialect.Wakeups) error {
	incoming, outgoing := d.Tables().Incoming, d.Tables().Outgoing
	ln, err := d.listen(ctx)
	if err != nil {
		return err
	}
	if ln == nil {
		return errors.New("seqbox: the ListenFunc returned no Listener and no error")
	}
	defer func() { _ = ln.Close() }() // the connection is gone or done with: nothing to report
	if err := ln.Listen(ctx, incoming, outgoing); err != nil {
		return err
	}
	l := &listening{self: self, w: w, incoming: incoming, outgoing: outgoing}
	d.probe(ctx, l)
	heard := false
	for {
		waitCtx, cancel := context.WithTimeout(ctx, l.wait())
		channel, payload, err := ln.Receive(waitCtx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
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

// listening is one listener connection's state.
type listening struct {
	self               string
	w                  dialect.Wakeups
	incoming, outgoing string
	ready              bool
}

// readyProbe is the payload a listener sends itself, until one comes back,
// once it has issued LISTEN: LISTEN takes effect when the server has run
// it, which a driver need not wait for, so Listening (and the scan for
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
func (d *pgDialect) probe(ctx context.Context, l *listening) {
	if _, err := d.Exec(ctx, d.DB(), wakeupSQL.Probe, kit.Args{"probe": l.self + senderEnd + readyProbe}); err != nil {
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
// transaction. A notification sent inside the producer's transaction would
// take PostgreSQL's database-wide notify lock through that transaction's
// commit, and serialise the producers' commits on it (BENCHMARKS.md,
// "Wake-ups across processes", issue 12).
func (d *pgDialect) NotifyWakeups(ctx context.Context, self string, incoming, sequenced []int64) error {
	var err error
	switch {
	case len(incoming) > 0 && len(sequenced) > 0:
		_, err = d.Exec(ctx, d.DB(), wakeupSQL.Both, kit.Args{"incoming": self + senderEnd + payloadOf(incoming),
			"sequenced": self + senderEnd + payloadOf(sequenced)})
	case len(incoming) > 0:
		_, err = d.Exec(ctx, d.DB(), wakeupSQL.Incoming, kit.Args{"incoming": self + senderEnd + payloadOf(incoming)})
	case len(sequenced) > 0:
		_, err = d.Exec(ctx, d.DB(), wakeupSQL.Sequenced, kit.Args{"sequenced": self + senderEnd + payloadOf(sequenced)})
	}
	return err
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
