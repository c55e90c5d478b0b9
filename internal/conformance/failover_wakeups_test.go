package conformance

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/pgpair"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// wakeBound is how long TestPostgresFailoverWakeups waits for each step: a failure
// bound ten times below the consumer's poll interval, so that only a
// wake-up (or the scan on the listener's reconnect) can deliver in time.
const wakeBound = time.Minute

// TestPostgresFailoverWakeups: the wake-up listener carries on through a
// PostgreSQL failover with no restart (docs/FAILOVER.md, "No restart"). A
// producer-only outbox and a consumer outbox that polls every ten minutes,
// both on the pair's multi-host DSN (target_session_attrs=read-write), the
// consumer listening through pgxListener (pgx.Connect on that DSN, as
// pgxlisten.New connects; the reconnect and the scan after it are the
// core's, in dialect/postgres). The primary is SIGKILLed and the standby
// promoted; then the same outboxes deliver a message committed on the new
// primary, the listener reconnects (a second connection, on the new
// primary: it hears the consumer's probe, which goes through the
// application's pool), and a message committed after that is announced on
// it and delivered.
func TestPostgresFailoverWakeups(t *testing.T) {
	t.Parallel()
	pair := pgpair.Start(t, pgpair.Config{})
	dsn := pair.DSN()
	const prefix = "wakefailover_" // a private server: no one else's tables

	var connects atomic.Int32 // listeners opened, each a connection
	heard := make(chan wakeHeard, 1000)
	listen := func(ctx context.Context) (postgres.Listener, error) {
		ln, err := pgxListener(ctx, dsn)
		if err != nil {
			t.Logf("listener: %v", err)
			return nil, err
		}
		return &wakeListener{Listener: ln, conn: connects.Add(1), heard: heard}, nil
	}
	delivered := make(chan outbox.MessageID, 1000)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	wakeStartOutbox(t, seqbox.New(wakeOpenDB(t, dsn)).TablePrefix(prefix).Migrate(true).InstanceID("consumer").
		Logger(logger.With("outbox", "consumer")).
		PollInterval(10*time.Minute).ReconcileInterval(10*time.Minute).MaybeDirtyWindow(wakeBound).
		PostgresOptions(postgres.WithListener(listen)).
		Queue("wake", 3, processor.Leased(func(_ context.Context, d processor.Delivery) error {
			select {
			case delivered <- d.ID:
			default: // more than the test reads: it fails on what it misses
			}
			return nil
		})))
	prodDB := wakeOpenDB(t, dsn)
	prod := wakeStartOutbox(t, seqbox.New(prodDB).TablePrefix(prefix).Migrate(true).InstanceID("producer").
		Logger(logger.With("outbox", "producer")).ProducerOnly().Queue("wake", 3, nil))

	// Each phase on a partition of its own: an announced partition is
	// probed again and again for MaybeDirtyWindow, which would deliver a
	// later message of it without any wake-up.
	awaitWakeHeard(t, heard, 1, "consumer") // its own probe: the first listener listens
	first := wakeEnqueue(t, prod, prodDB, 0, "before")
	awaitWakeHeard(t, heard, 1, "producer")
	awaitWakeDelivered(t, delivered, first)

	pair.KillPrimary()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a failure bound
	defer cancel()
	pair.Promote(ctx)

	// Committed while the listener reconnects, or after: the scan on its
	// reconnect or the producer's announcement delivers it.
	awaitWakeDelivered(t, delivered, wakeEnqueue(t, prod, prodDB, 1, "after promotion"))

	// The listener reconnected (the first connection died with the
	// primary) and hears its own probe, sent through the new primary; the
	// scan for what committed while it was away starts as the probe comes
	// back, as the next commit begins. That commit is announced on the new
	// connection, and the announcement delivers it. (Should the scan read
	// after that commit, it would deliver it too: the test could not fail
	// for it. Run with the announcement dropped, it fails here.)
	awaitWakeHeard(t, heard, 2, "consumer")
	last := wakeEnqueue(t, prod, prodDB, 2, "after reconnecting")
	awaitWakeHeard(t, heard, 2, "producer")
	awaitWakeDelivered(t, delivered, last)
	t.Logf("listener connections opened: %d", connects.Load())
}

// wakeHeard is a notification a listener received, and which of the
// consumer's listener connections (1, 2, …) received it.
type wakeHeard struct {
	conn             int32
	channel, payload string
}

// wakeListener reports what it receives, with its connection's number.
type wakeListener struct {
	postgres.Listener
	conn  int32
	heard chan<- wakeHeard
}

func (l *wakeListener) Receive(ctx context.Context) (channel, payload string, err error) {
	channel, payload, err = l.Listener.Receive(ctx)
	if err == nil {
		select {
		case l.heard <- wakeHeard{conn: l.conn, channel: channel, payload: payload}:
		default: // more than the test reads
		}
	}
	return channel, payload, err
}

// awaitWakeHeard waits for a notification received on the consumer's
// listener connection number conn or a later one, whose payload holds
// sender (a payload starts with its sender's instance name).
func awaitWakeHeard(t *testing.T, heard <-chan wakeHeard, conn int32, sender string) {
	t.Helper()
	timeout := time.After(wakeBound)
	for {
		select {
		case h := <-heard:
			if h.conn >= conn && strings.Contains(h.payload, sender) {
				return
			}
		case <-timeout:
			t.Fatalf("listener connection %d heard nothing from %q", conn, sender)
		}
	}
}

// awaitWakeDelivered waits for the consumer's handler to be handed id; a
// message delivered again (an ack lost with the primary) is no failure.
func awaitWakeDelivered(t *testing.T, delivered <-chan outbox.MessageID, id outbox.MessageID) {
	t.Helper()
	timeout := time.After(wakeBound)
	for {
		select {
		case got := <-delivered:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("message %v not delivered within %v (the consumer polls every ten minutes)", id, wakeBound)
		}
	}
}

// enqueue commits one message, trying again until the database takes it:
// a commit that failed in the failover may have happened, and its
// DedupKey makes the retry return the first message's id then.
func wakeEnqueue(t *testing.T, prod *seqbox.Outbox, db *bun.DB, partition int, key string) outbox.MessageID {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wakeBound)
	defer cancel()
	for {
		id, err := prod.Enqueue(ctx, db, "wake", outbox.Message{Partition: partition, PayloadType: "t", DedupKey: key})
		if err == nil {
			return id
		}
		t.Logf("enqueue %q: %v; trying again", key, err)
		select {
		case <-ctx.Done():
			t.Fatalf("enqueue %q: not committed within %v: %v", key, wakeBound, err)
		case <-time.After(50 * time.Millisecond): // not a busy loop
		}
	}
}

// openDB opens dsn with pgx's database/sql driver.
func wakeOpenDB(t *testing.T, dsn string) *bun.DB {
	sqldb, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// startOutbox starts b and stops it at cleanup.
func wakeStartOutbox(t *testing.T, b *seqbox.Builder) *seqbox.Outbox {
	t.Helper()
	ob, err := b.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Stop(ctx)
	})
	return ob
}

// pgxListener is a postgres.Listener on its own pgx connection to dsn: what
// the pglisten module's pgxlisten.New gives an application, written here
// because a core test may not import that module (nor it the core's
// internal test helpers).
func pgxListener(ctx context.Context, dsn string) (postgres.Listener, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return pgxConnListener{conn}, nil
}

type pgxConnListener struct{ conn *pgx.Conn }

func (l pgxConnListener) Listen(ctx context.Context, channels ...string) error {
	for _, ch := range channels {
		if _, err := l.conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

func (l pgxConnListener) Receive(ctx context.Context) (channel, payload string, err error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", "", err
	}
	return n.Channel, n.Payload, nil
}

func (l pgxConnListener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.conn.Close(ctx)
}
