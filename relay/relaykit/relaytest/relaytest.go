// Package relaytest is the kill-and-verify check of seqbox's own relay
// modules: a relay runs in worker processes (the test binary, run again)
// that are SIGKILLed mid-stream and restarted, and the test then checks
// what the broker holds, as the core suite's CrashRestartNothingLost does
// for the database. It also has the relays' other shared test helpers (a
// cuttable TCP proxy, backlogs, drains). Like relaykit it serves this
// repository only and carries no compatibility promise.
package relaytest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// WorkerEnv carries the worker's database file; a test run without it is
// not a worker.
const WorkerEnv = "SEQBOX_RELAY_WORKER_DB"

// holdEnv tells a worker that it is to be killed: once it has acked at
// least that many messages it holds its relay's batches after they are
// published and reports on file descriptor 3 (holdFD).
const holdEnv = "SEQBOX_RELAY_WORKER_HOLD"

const holdFD = 3

// KillAndRestart runs the test named worker of this test binary with
// WorkerEnv=dbFile and env, kills times, then once more until it exits by
// itself (which a worker does when its queue is drained). It returns how
// many kills landed on a running worker: all of them, or the test fails.
//
// A kill is not timed: each worker acks at least 50 to 250 messages (acks
// committed to the database), then holds every batch its relay has
// published before seqbox commits its ack, and says so; only then is it
// SIGKILLed. So every kill lands on a worker with progress behind it, a
// published batch whose ack is lost, and work left, however fast the
// machine is. A killed worker commits fewer than 450 acks (see holder), so
// the backlog must exceed kills × 450 messages.
func KillAndRestart(t *testing.T, worker, dbFile string, env []string, kills int) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(extra []string, report *os.File) *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^"+worker+"$", "-test.timeout=5m")
		cmd.Env = append(append(append(os.Environ(), WorkerEnv+"="+dbFile), env...), extra...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if report != nil {
			cmd.ExtraFiles = []*os.File{report} // descriptor holdFD in the worker
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	landed := 0
	for i := range kills {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := start([]string{holdEnv + "=" + strconv.Itoa(50+rand.IntN(201))}, w)
		_ = w.Close() // the worker has its own copy: its exit ends the read below
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		held := make(chan bool, 1)
		go func() {
			_, err := io.ReadFull(r, make([]byte, 1))
			_ = r.Close()
			held <- err == nil
		}()
		if !<-held {
			err := <-done
			t.Fatalf("worker %d exited before it held a batch (the backlog is too small to kill %d times?): %v", i+1, kills, err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("killing worker %d: %v", i+1, err)
		}
		if err := <-done; !killed(err) {
			t.Fatalf("worker %d was not ended by its kill: %v", i+1, err)
		}
		landed++
	}
	cmd := start(nil, nil)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final worker: %v", err)
	}
	return landed
}

// killed tells whether a worker's exit was a signal's.
func killed(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	st, ok := exit.Sys().(syscall.WaitStatus)
	return ok && st.Signaled()
}

// holder is a killed worker's middleware: it lets the relay's calls through
// until the outbox has acked after messages, then keeps every call that
// acked something from returning, so that its acks are never committed,
// and closes held at the first.
type holder struct {
	life    context.Context // the worker's: the hold outlasts a call's deadline
	after   int64
	ob      atomic.Pointer[seqbox.Outbox]
	started chan struct{} // ob is set
	once    sync.Once
	held    chan struct{}
}

func (h *holder) middleware(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
	err := next(ctx)
	if c.Batch.Acked() == 0 {
		return err // nothing to commit
	}
	// Every committed ack passes this check, so a worker commits fewer than
	// after + 4×50 (a batch per partition past it) before it holds.
	select {
	case <-h.started:
	case <-h.life.Done():
		return h.life.Err()
	}
	if h.ob.Load().Counters().Delivered < h.after { // Delivered counts committed acks
		return err
	}
	h.once.Do(func() { close(h.held) })
	<-h.life.Done() // the test kills the worker before this
	return h.life.Err()
}

// Unreachable reports a broker the tests cannot reach: under CI=true the
// test fails, otherwise it is skipped with a message loud enough to be
// seen in a long run. envVar names the variable that points at the
// server.
func Unreachable(t testing.TB, what, envVar string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s is not reachable (%v)", what, err)
	if envVar != "" {
		msg += "; set " + envVar + " or start the server (.ci/run does)"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s TESTS: %s ***\n\n", strings.ToUpper(what), msg)
	t.Skip(msg)
}

// WaitDrained returns when ob's queues have nothing left to deliver, or
// with ctx's error.
func WaitDrained(ctx context.Context, ob *seqbox.Outbox) error {
	for {
		st, err := ob.Stats(ctx)
		if err == nil {
			left := int64(0)
			for _, q := range st.Queues {
				left += q.Incoming + q.Unprocessed
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Proxy forwards TCP connections to a broker and can cut them: Down closes
// every connection and refuses new ones, as a broker that went away; Up
// accepts again. It stands between a relay and a real server in the
// "broker down" tests.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	refused int
	conns   map[net.Conn]struct{}
}

// NewProxy listens on a free local port for target ("host:port"); it
// closes when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); p.Down() })
	go p.serve()
	return p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.refused++
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Refused counts the connections closed at once because the proxy was
// down: a test that must see a client try while it is down waits for it.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// OpenSQLite opens an embedded database file, closed when the test ends.
func OpenSQLite(t testing.TB, file string) *bun.DB {
	sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), file))
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(sqldb, sqlitedialect.New())
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Enqueue writes n messages to queue "orders" in one transaction: message i
// has payload "i", key "customer-<i%7>", type "order.v1" and headers
// traceparent "00-abc-def-01" and n "i"; the ids are in that order.
func Enqueue(ctx context.Context, t testing.TB, ob *seqbox.Outbox, db *bun.DB, n int) []outbox.MessageID {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{Key: "customer-" + strconv.Itoa(i%7), PayloadType: "order.v1",
			Payload: []byte(strconv.Itoa(i)), Headers: map[string]string{"traceparent": "00-abc-def-01", "n": strconv.Itoa(i)}}
	}
	ids, err := ob.EnqueueBatch(ctx, db, "orders", msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// PublishTwice is a middleware that runs every other handler call twice:
// the batch is published again with the same ids and seqs, as it is when a
// process dies after the broker confirmed it and before seqbox acked it.
// It counts the repeats in repeated.
func PublishTwice(repeated *atomic.Int64) processor.Middleware {
	var calls atomic.Int64
	return func(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
		if calls.Add(1)%2 == 1 {
			if err := next(ctx); err != nil {
				return err
			}
			repeated.Add(1)
		}
		return next(ctx)
	}
}

// RelayOptions are the options the relay tests run a queue with: small
// batches, quick retries without end, and short leases, so that a killed
// worker's leases expire soon and a publish stuck on a vanished broker
// ends at its 700 ms deadline.
func RelayOptions(extra ...processor.QueueOption) []processor.QueueOption {
	return append([]processor.QueueOption{processor.BatchSize(10), processor.Retry(10*time.Millisecond, 50*time.Millisecond),
		processor.MaxAttempts(processor.MaxAttemptsNever), processor.Lease(time.Second, 300*time.Millisecond)}, extra...)
}

// BrokerDown runs relay h on a fresh 2-partition queue "orders" of db,
// enqueues n messages, and cuts the broker (proxy.Down) once some are
// delivered, until the partitions have retried a few times; then restores
// it and returns the ids once all are processed.
func BrokerDown(ctx context.Context, t testing.TB, db *bun.DB, h processor.Handler, proxy *Proxy, n int) []outbox.MessageID {
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).Queue("orders", 2, h, RelayOptions()...).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ob.Stop(ctx) }()
	ids := Enqueue(ctx, t, ob, db, n)
	waitFor(ctx, t, "a first delivery", func() bool { return ob.Counters().Delivered > 0 })
	proxy.Down()
	retried := ob.Counters().Retried
	waitFor(ctx, t, "partitions retrying", func() bool { return ob.Counters().Retried >= retried+3 })
	if d := ob.Counters().Delivered; d >= int64(n) {
		t.Fatalf("all %d delivered before the broker went down: nothing tested", d)
	}
	proxy.Up()
	if err := ob.WaitProcessed(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	return ids
}

func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Backlog writes n messages (see Enqueue) to queue "orders" (4 partitions)
// of a new embedded database file through a producer-only outbox, and
// closes it: one process at a time may use an SQLite file, and the relay
// workers come next.
func Backlog(ctx context.Context, t testing.TB, file string, n int) []outbox.MessageID {
	db := OpenSQLite(t, file)
	prod, err := seqbox.New(db).Migrate(true).ProducerOnly().Queue("orders", 4, nil).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := Enqueue(ctx, t, prod, db, n)
	if err := prod.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// BenchMessages are n messages of 256 bytes over 64 keys.
func BenchMessages(n int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{Key: "k" + strconv.Itoa(i%64), PayloadType: "t", Payload: make([]byte, 256)}
	}
	return msgs
}

// Drain enqueues msgs to queue (16 partitions) of db with a producer-only
// outbox, then times an outbox with handler h (batches of 1,000, unless
// opts say otherwise) from its start until every message is processed.
func Drain(ctx context.Context, tb testing.TB, db *bun.DB, queue string, msgs []outbox.Message, h processor.Handler, opts ...processor.QueueOption) time.Duration {
	prod, err := seqbox.New(db).Migrate(true).ProducerOnly().Queue(queue, 16, nil).Start(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	ids, err := prod.EnqueueBatch(ctx, db, queue, msgs)
	if err != nil {
		tb.Fatal(err)
	}
	if err := prod.Stop(ctx); err != nil {
		tb.Fatal(err)
	}
	began := time.Now()
	ob, err := seqbox.New(db).Queue(queue, 16, h, append([]processor.QueueOption{processor.BatchSize(1000)}, opts...)...).Start(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if err := ob.WaitProcessed(ctx, ids...); err != nil {
		tb.Fatal(err)
	}
	took := time.Since(began)
	if err := ob.Stop(ctx); err != nil {
		tb.Fatal(err)
	}
	return took
}

// NoopHandler does nothing: a drain with it is the outbox's own share.
func NoopHandler() processor.Handler {
	return processor.LeasedBatch(func(context.Context, *processor.Batch) error { return nil })
}

// Report reports a relay benchmark's figures: relay_msgs/s and
// plain_msgs/s over n messages each, relay/plain, and relay/noop_handler.
func Report(b *testing.B, n int, relay, plain, noop time.Duration) {
	r, p := float64(n)/relay.Seconds(), float64(n)/plain.Seconds()
	b.ReportMetric(r, "relay_msgs/s")
	b.ReportMetric(p, "plain_msgs/s")
	b.ReportMetric(r/p, "relay/plain")
	b.ReportMetric(r/(float64(n)/noop.Seconds()), "relay/noop_handler")
}

// RunWorker is the body of a relay worker process: relay h works queue
// "orders" (4 partitions) of the database file until it is drained, or,
// started by KillAndRestart to be killed, until it holds a published batch
// (see KillAndRestart), which it reports and keeps until the kill.
func RunWorker(ctx context.Context, t testing.TB, file string, h processor.Handler) {
	opts := RelayOptions(processor.BatchSize(50))
	var hold *holder
	if s := os.Getenv(holdEnv); s != "" {
		after, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", holdEnv, s, err)
		}
		hold = &holder{life: ctx, after: after, started: make(chan struct{}), held: make(chan struct{})}
		opts = append(opts, processor.Use(hold.middleware))
	}
	ob, err := seqbox.New(OpenSQLite(t, file)).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, opts...).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hold != nil {
		hold.ob.Store(ob)
		close(hold.started)
		select {
		case <-hold.held:
		case <-ctx.Done():
			t.Fatalf("no batch held: %v", ctx.Err())
		}
		report := os.NewFile(holdFD, "report")
		if _, err := report.Write([]byte{'\n'}); err != nil {
			t.Fatalf("reporting the hold: %v", err)
		}
		_ = report.Close()
		<-ctx.Done() // killed here; the context ends only if the test is gone
		t.Fatalf("held and not killed: %v", ctx.Err())
	}
	if err := WaitDrained(ctx, ob); err != nil {
		t.Fatal(err)
	}
	if err := ob.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
