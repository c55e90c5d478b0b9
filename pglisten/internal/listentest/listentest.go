// Package listentest is the pglisten adapters' shared tests: the
// postgres.Listener contract, and wake-ups between two outboxes on the
// same tables (another process, as far as the database can tell),
// through the reconnect after the listener's connection is killed. It
// uses seqbox's public packages only (not its internal test helpers), and
// the PostgreSQL test database of SEQBOX_PG_DSN (the local server by
// default); a server that cannot be reached fails the test under CI=true
// and skips it, loudly, otherwise.
package listentest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// PostgresDSNDefault is the local test server.
const PostgresDSNDefault = "postgres://postgres:@127.0.0.1:5432/test?sslmode=disable"

// bound is how long a test waits for what should take milliseconds: a
// failure bound, not a timing assertion.
const bound = 30 * time.Second

// PostgresDSN is SEQBOX_PG_DSN or the local default.
func PostgresDSN() string {
	if v := os.Getenv("SEQBOX_PG_DSN"); v != "" {
		return v
	}
	return PostgresDSNDefault
}

// OpenPgdriver opens the test database with bun's pgdriver.
func OpenPgdriver(t testing.TB) *bun.DB {
	dsn := PostgresDSN()
	if !strings.Contains(dsn, "read_timeout") { // pgdriver's 10 s would cut long lock waits
		dsn += sep(dsn) + "read_timeout=60s"
	}
	return finish(t, sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn))))
}

// OpenPgx opens the test database with pgx's database/sql driver.
func OpenPgx(t testing.TB) *bun.DB {
	sqldb, err := sql.Open("pgx", PostgresDSN())
	require.NoError(t, err)
	return finish(t, sqldb)
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

func finish(t testing.TB, sqldb *sql.DB) *bun.DB {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		msg := fmt.Sprintf("PostgreSQL is not reachable (%v); set SEQBOX_PG_DSN or start the server (.ci/run does)", err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING POSTGRESQL TESTS: %s ***\n\n", msg)
		t.Skip(msg)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Prefix returns a table prefix of the test's own; its tables are dropped
// when the test ends.
func Prefix(t testing.TB, db *bun.DB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "pgl" + hex.EncodeToString(b) + "_"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var tables []string
		if err := db.NewRaw("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND starts_with(tablename, ?)",
			prefix).Scan(ctx, &tables); err != nil {
			t.Logf("tables of %s not dropped: %v", prefix, err)
			return
		}
		for _, table := range tables {
			_, _ = db.NewRaw("DROP TABLE IF EXISTS ? CASCADE", bun.Ident(table)).Exec(ctx)
		}
	})
	return prefix
}

// notifyUntilHeard sends payload on channel until ln receives it: LISTEN
// may take effect after Listen returns. Timeouts on the way must match
// context.DeadlineExceeded and leave the listener usable.
func notifyUntilHeard(t *testing.T, db *bun.DB, ln postgres.Listener, channel, payload string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		_, err := db.NewRaw("SELECT pg_notify(?, ?)", channel, payload).Exec(t.Context())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		ch, p, err := ln.Receive(ctx)
		cancel()
		if err == nil {
			require.Equal(t, []string{channel, payload}, []string{ch, p})
			return
		}
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	t.Fatalf("notifications on %s were not heard", channel)
}

// Contract checks a ListenFunc's listeners against postgres.Listener's
// documentation: notifications on every channel listened to, a deadline
// that leaves the connection usable, a cancellation that ends the wait,
// and a killed connection that is an error of its own.
func Contract(t *testing.T, db *bun.DB, listen postgres.ListenFunc) {
	ctx := t.Context()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	one, two := "pglisten_"+hex.EncodeToString(b), "pglisten_"+hex.EncodeToString(b)+"_two"

	ln, err := listen(ctx)
	require.NoError(t, err)
	require.NoError(t, ln.Listen(ctx, one, two))
	notifyUntilHeard(t, db, ln, one, "first")

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _, err = ln.Receive(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing sent: the deadline ends the wait")
	_, err = db.NewRaw("SELECT pg_notify(?, 'second')", two).Exec(ctx)
	require.NoError(t, err)
	wait, cancel := context.WithTimeout(ctx, bound)
	ch, payload, err := ln.Receive(wait)
	cancel()
	require.NoError(t, err, "still listening after a deadline")
	require.Equal(t, []string{two, "second"}, []string{ch, payload})

	canceled, cancel := context.WithCancel(ctx)
	stop := time.AfterFunc(10*time.Millisecond, cancel) // before or during the wait: either must end it
	defer stop.Stop()
	_, _, err = ln.Receive(canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, ln.Close())

	// A killed connection: Receive reports it, not as a deadline.
	ln, err = listen(ctx)
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	require.NoError(t, ln.Listen(ctx, one+"_killed"))
	notifyUntilHeard(t, db, ln, one+"_killed", "first")
	require.Equal(t, 1, Kill(t, db, one+"_killed"))
	wait, cancel = context.WithTimeout(ctx, bound)
	defer cancel()
	_, _, err = ln.Receive(wait)
	require.Error(t, err)
	require.NoError(t, wait.Err(), "the wait ended by the kill, not by its bound")
}

// Kill ends the server sessions whose last statement was LISTEN on a
// channel whose name starts with channelPrefix (a listener's last
// statement, whichever of its channels it listened to last), and returns
// how many it ended.
func Kill(t testing.TB, db *bun.DB, channelPrefix string) int {
	t.Helper()
	var n int
	// MATERIALIZED: the filter runs first, whatever order the planner
	// would give the conditions.
	require.NoError(t, db.NewRaw(`WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND starts_with(query, ?))
		SELECT COUNT(*) FROM victims WHERE pg_terminate_backend(pid)`, `LISTEN "`+channelPrefix).Scan(t.Context(), &n))
	return n
}

// spy wraps a ListenFunc: it reports every notification its listeners
// receive, and holds every call after the first until release is closed.
type spy struct {
	listen  postgres.ListenFunc
	heard   chan string   // "channel payload" of each notification received
	held    chan struct{} // a call after the first is waiting for release
	release chan struct{}
	calls   atomic.Int32
}

func newSpy(listen postgres.ListenFunc) *spy {
	return &spy{listen: listen, heard: make(chan string, 10000), held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *spy) ListenFunc(ctx context.Context) (postgres.Listener, error) {
	if s.calls.Add(1) > 1 {
		select {
		case s.held <- struct{}{}:
		default:
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ln, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	return &spyListener{Listener: ln, heard: s.heard}, nil
}

type spyListener struct {
	postgres.Listener
	heard chan<- string
}

func (l *spyListener) Receive(ctx context.Context) (channel, payload string, err error) {
	channel, payload, err = l.Listener.Receive(ctx)
	if err == nil {
		select {
		case l.heard <- channel + " " + payload:
		default: // more than the test reads
		}
	}
	return channel, payload, err
}

// awaitListening waits for the first notification: the outbox's own
// probe, which means its LISTEN has taken effect.
func (s *spy) awaitListening(t *testing.T) {
	t.Helper()
	select {
	case <-s.heard:
	case <-time.After(bound):
		t.Fatal("the outbox's listener heard nothing, not even its own probe")
	}
}

// awaitHeard waits for a notification on channel whose payload holds
// sender (the payload starts with the sender's instance name).
func (s *spy) awaitHeard(t *testing.T, channel, sender string) {
	t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case h := <-s.heard:
			if strings.HasPrefix(h, channel+" ") && strings.Contains(h, sender) {
				return
			}
		case <-timeout:
			t.Fatalf("no notification from %s on %s", sender, channel)
		}
	}
}

// discard is a logger for outboxes whose complaints the test does not read.
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start starts b and stops it at cleanup.
func start(t *testing.T, b *seqbox.Builder) *seqbox.Outbox {
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

// consumer is an outbox that polls every ten minutes, listening through
// listen. A partition announced before its commit is probed for as long
// as the test waits (MaybeDirtyWindow), however slow the machine.
func consumer(t *testing.T, db *bun.DB, prefix string, listen postgres.ListenFunc) *seqbox.Outbox {
	return start(t, seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(discard()).InstanceID("consumer").
		PollInterval(10*time.Minute).ReconcileInterval(10*time.Minute).
		MaybeDirtyWindow(bound).
		PostgresOptions(postgres.WithListener(listen)).
		Queue("wake", 2, processor.Leased(func(context.Context, processor.Delivery) error { return nil })))
}

// producer is a producer-only outbox; noWakeups keeps it from notifying.
func producer(t *testing.T, db *bun.DB, prefix, id string, noWakeups bool) *seqbox.Outbox {
	b := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(discard()).InstanceID(id).ProducerOnly()
	if noWakeups {
		b.NoWakeups()
	}
	return start(t, b.Queue("wake", 2, nil))
}

// AcrossOutboxes: a producer-only outbox's commit is heard by another
// outbox's listener, which delivers the message at once although it
// polls every ten minutes; so is a commit the caller makes later than
// its enqueue.
func AcrossOutboxes(t *testing.T, db *bun.DB, listen postgres.ListenFunc) {
	prefix := Prefix(t, db)
	prod := producer(t, db, prefix, "producer", false)
	s := newSpy(listen)
	cons := consumer(t, db, prefix, s.ListenFunc)
	s.awaitListening(t)

	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	id, err := prod.Enqueue(ctx, db, "wake", outbox.Message{Partition: 0, PayloadType: "t"})
	require.NoError(t, err)
	s.awaitHeard(t, prefix+"incoming", "producer")
	require.NoError(t, cons.WaitProcessed(ctx, id), "woken by the producer's commit, not by a ten-minute poll")

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	late, err := prod.Enqueue(ctx, tx, "wake", outbox.Message{Partition: 1, PayloadType: "t"})
	require.NoError(t, err)
	s.awaitHeard(t, prefix+"incoming", "producer") // announced before the commit
	require.NoError(t, tx.Commit())
	require.NoError(t, cons.WaitProcessed(ctx, late), "a caller-owned transaction: the listener keeps probing")
}

// ReconnectReconciles: when the listener's connection is killed, the
// outbox opens another, and on connecting scans for what committed
// meanwhile: a message whose producer announces nothing is delivered
// then, although the consumer polls every ten minutes.
func ReconnectReconciles(t *testing.T, db *bun.DB, listen postgres.ListenFunc) {
	prefix := Prefix(t, db)
	prod := producer(t, db, prefix, "silent-producer", true)
	s := newSpy(listen)
	cons := consumer(t, db, prefix, s.ListenFunc)
	s.awaitListening(t)

	require.Equal(t, 1, Kill(t, db, prefix))
	select {
	case <-s.held: // the listener broke, and the outbox asks for another
	case <-time.After(bound):
		t.Fatal("the outbox did not ask for a new listener after its connection was killed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	id, err := prod.Enqueue(ctx, db, "wake", outbox.Message{Partition: 1, PayloadType: "t"})
	require.NoError(t, err)
	close(s.release)
	require.NoError(t, cons.WaitProcessed(ctx, id), "found by the scan on reconnecting")
	require.Equal(t, int32(2), s.calls.Load())
}

// WakeupLatency: a producer-only outbox enqueues one message per
// transaction at 1,000 msgs/s for 3 s, and a consumer outbox listening
// through listen, with the default poll interval, handles them; it
// returns commit-to-handler p50, p99 and max in ms.
func WakeupLatency(b *testing.B, prodDB, consDB *bun.DB, listen postgres.ListenFunc) (p50, p99, worst float64) {
	ctx := context.Background()
	prefix := Prefix(b, prodDB)
	prod, err := seqbox.New(prodDB).TablePrefix(prefix).Migrate(true).Logger(discard()).
		ProducerOnly().Queue("wake", 16, nil).Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = prod.Stop(ctx) }()
	var mu sync.Mutex
	var lat []float64
	committed := map[outbox.MessageID]time.Time{}
	cons, err := seqbox.New(consDB).TablePrefix(prefix).Logger(discard()).
		PostgresOptions(postgres.WithListener(listen)).
		Queue("wake", 16, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if at, ok := committed[d.ID]; ok {
				lat = append(lat, float64(now.Sub(at).Microseconds())/1000)
			}
			return nil
		})).Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cons.Stop(ctx) }()
	ids := make([]outbox.MessageID, 0, 3000)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range 3000 {
		<-tick.C
		mu.Lock() // the handler waits until the commit time is recorded
		id, err := prod.Enqueue(ctx, prodDB, "wake", outbox.Message{Partition: i % 16, PayloadType: "t"})
		committed[id] = time.Now()
		mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cons.WaitProcessed(wait, ids...); err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		b.Fatal("no latency recorded")
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	return q(0.5), q(0.99), lat[len(lat)-1]
}
