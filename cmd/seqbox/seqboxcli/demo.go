package seqboxcli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
	dsnutil "github.com/seqbox/seqbox/internal/dsn"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// demoConfig is the demo's command line.
type demoConfig struct {
	dsn         string
	messages    int
	queues      int
	partitions  int
	producers   int
	batch       int
	rollbackPct int
	timeout     time.Duration
	keep        bool
	quiet       bool
	logLevel    slog.Level
}

func demoFlags(w io.Writer, c *demoConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox demo", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.dsn, "dsn", "", "database to run on (default: a fresh SQLite file in a temporary directory)")
	fs.IntVar(&c.messages, "messages", 100000, "messages to enqueue, rolled-back ones included")
	fs.IntVar(&c.queues, "queues", 3, "queues")
	fs.IntVar(&c.partitions, "partitions", 8, "partitions per queue (1..1024)")
	fs.IntVar(&c.producers, "producers", 4, "concurrent producer goroutines")
	fs.IntVar(&c.batch, "batch", 100, "messages per producer transaction")
	fs.IntVar(&c.rollbackPct, "rollback-pct", 10, "percentage of transactions rolled back after enqueueing (0..100)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long to wait for delivery once producers finish")
	fs.BoolVar(&c.keep, "keep", false, "keep the database (temporary file) or the tables (--dsn) afterwards")
	fs.BoolVar(&c.quiet, "quiet", false, "print no progress lines")
	c.logLevel = slog.LevelWarn
	fs.TextVar(&c.logLevel, "log-level", c.logLevel, "level of the outbox's log on stderr: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: seqbox demo [flags]

Runs producers that enqueue messages in transactions, a share of which roll
back, and consumers on every partition of every queue; then checks that
every committed message was delivered once, no rolled-back one was, and
each partition saw gap-free seqs 1, 2, 3, … in order. Exit status 0 if
every check passed, 1 if one failed, 2 on a usage error.

With no --dsn it needs no set-up: it uses a fresh SQLite file. With --dsn it
creates tables under a table prefix of its own and drops them at the end.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nDatabases (--dsn):\n"+dsnHelp)
	}
	return fs
}

func demoUsage(w io.Writer) {
	demoFlags(w, &demoConfig{}).Usage()
}

func (c *demoConfig) validate() error {
	switch {
	case c.messages < 1:
		return errors.New("--messages must be >= 1")
	case c.queues < 1 || c.queues > 100:
		return errors.New("--queues must be 1..100")
	case c.partitions < outbox.MinPartitions || c.partitions > outbox.MaxPartitions:
		return fmt.Errorf("--partitions must be %d..%d", outbox.MinPartitions, outbox.MaxPartitions)
	case c.producers < 1 || c.producers > 1000:
		return errors.New("--producers must be 1..1000")
	case c.batch < 1 || c.batch > 100000:
		return errors.New("--batch must be 1..100000")
	case c.rollbackPct < 0 || c.rollbackPct > 100:
		return errors.New("--rollback-pct must be 0..100")
	case c.timeout <= 0:
		return errors.New("--timeout must be > 0")
	}
	return nil
}

func runDemo(ctx context.Context, s streams, args []string) int {
	var c demoConfig
	fs := demoFlags(s.stderr, &c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage // flag has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.stderr, "seqbox demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return ExitUsage
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(s.stderr, "seqbox demo: %v\n", err)
		return ExitUsage
	}
	if c.dsn != "" {
		if _, _, err := ParseDSN(c.dsn); err != nil {
			fmt.Fprintf(s.stderr, "seqbox demo: %v\n", err)
			return ExitUsage
		}
	}
	d := &demo{cfg: c, out: s.stdout, errOut: s.stderr, rec: newRecorder(), led: newLedger()}
	return d.run(ctx)
}

// demo is one run.
type demo struct {
	cfg         demoConfig
	out, errOut io.Writer
	rec         *recorder
	led         *ledger
}

var errRollback = errors.New("demo: deliberate rollback")

func (d *demo) failf(format string, args ...any) int {
	fmt.Fprintf(d.errOut, "seqbox demo: "+format+"\n", args...)
	return ExitFailure
}

func (d *demo) run(ctx context.Context) (code int) {
	c := d.cfg
	dsn, prefix, where := c.dsn, "", ""
	if dsn == "" {
		// A fresh file each run: nothing to set up, no old data to confuse the checks.
		dir, err := os.MkdirTemp("", "seqbox-demo-")
		if err != nil {
			return d.failf("%v", err)
		}
		path := filepath.Join(dir, "demo.db")
		dsn, prefix = "sqlite:"+path, "seqbox_"
		where = "SQLite file " + path + " (temporary)"
		defer func() {
			if c.keep {
				fmt.Fprintf(d.out, "kept the database: %s\n", path)
				return
			}
			_ = os.RemoveAll(dir)
		}()
	} else {
		// Tables of our own: a shared database may hold other seqbox tables
		// or an earlier run's, and the checks need seqs to start at 1.
		var b [3]byte
		_, _ = rand.Read(b[:])
		prefix = "demo" + hex.EncodeToString(b[:]) + "_"
		where = dsnutil.Redact(dsn) + ", tables " + prefix + "*"
	}

	db, err := OpenDB(ctx, dsn)
	if err != nil {
		return d.failf("%v", err)
	}
	defer db.Close()
	if c.dsn != "" {
		defer func() {
			if c.keep {
				fmt.Fprintf(d.out, "kept the tables %s* in %s\n", prefix, dsnutil.Redact(dsn))
				return
			}
			// Runs after an interrupt too, hence its own context.
			dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := dropTables(dropCtx, db, prefix); err != nil {
				code = d.failf("drop tables %s*: %v", prefix, err)
			}
		}()
	}

	queues := make([]string, c.queues)
	b := seqbox.New(db).TablePrefix(prefix).Migrate(true).
		Logger(slog.New(slog.NewTextHandler(d.errOut, &slog.HandlerOptions{Level: c.logLevel})))
	for i := range queues {
		queues[i] = fmt.Sprintf("queue%d", i)
		b.Queue(queues[i], c.partitions, processor.Leased(d.handle))
	}
	ob, err := b.Start(ctx)
	if err != nil {
		return d.failf("start: %v", err)
	}
	stopped := false
	stop := func() error {
		stopped = true
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return ob.Stop(stopCtx)
	}
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()

	fmt.Fprintf(d.out, "seqbox demo on %s: %d messages, %d queues x %d partitions, %d producers, %d messages per transaction, %d%% rolled back\n",
		where, c.messages, c.queues, c.partitions, c.producers, c.batch, c.rollbackPct)

	start := time.Now()
	progressDone := d.progress(start)
	enqueueErr := d.produce(ctx, ob, queues)
	enqueueElapsed := time.Since(start)
	if enqueueErr != nil {
		progressDone()
		if ctx.Err() != nil {
			// A transaction cut by the interrupt reports only "tx done".
			return d.failf("interrupted after %v", enqueueElapsed.Round(time.Millisecond))
		}
		return d.failf("enqueue: %v", enqueueErr)
	}
	committed := int(d.led.committedCount.Load())
	waitErr := d.waitDelivered(ctx, committed)
	e2eElapsed := time.Since(start)
	progressDone()

	fmt.Fprintf(d.out, "enqueue: %d messages in %d transactions by %d producers in %v: %d committed (%.0f msg/s), %d rolled back\n",
		c.messages, (c.messages+c.batch-1)/c.batch, c.producers, enqueueElapsed.Round(time.Millisecond),
		committed, float64(committed)/enqueueElapsed.Seconds(), d.led.rolledBackCount.Load())
	failed := false
	if waitErr != nil {
		failed = true
		fmt.Fprintf(d.out, "end-to-end: %v\n", waitErr)
		d.printBacklog(ob)
	} else {
		fmt.Fprintf(d.out, "end-to-end: %d committed messages delivered in %v: %.0f msg/s\n",
			committed, e2eElapsed.Round(time.Millisecond), float64(committed)/e2eElapsed.Seconds())
		// The handler saw every message; the acks should follow at once.
		if err := d.waitAcked(ctx, ob); err != nil {
			failed = true
			fmt.Fprintf(d.out, "acks: %v\n", err)
		}
	}

	counters := ob.Counters()
	if err := stop(); err != nil {
		failed = true
		fmt.Fprintf(d.out, "stop: %v\n", err)
	}
	fmt.Fprintf(d.out, "outbox counters: enqueued=%d sequenced=%d delivered=%d retried=%d dead-lettered=%d vacuumed=%d\n",
		counters.Enqueued, counters.Sequenced, counters.Delivered, counters.Retried, counters.DeadLettered, counters.Vacuumed)

	// After Stop: a late redelivery would be recorded by now.
	d.led.mu.Lock()
	rep := verify(d.led.committed, d.led.rolledBack, d.rec.deliveries())
	d.led.mu.Unlock()
	fmt.Fprintln(d.out, rep.line())
	for _, p := range rep.problems {
		fmt.Fprintln(d.out, "  "+p)
	}
	if failed || !rep.ok() {
		return ExitFailure
	}
	return ExitOK
}

func dropTables(ctx context.Context, db *bun.DB, prefix string) error {
	dl, err := dialects.Open(db, prefix)
	if err != nil {
		return err
	}
	return dl.SchemaDrop(ctx, &dialect.SchemaDropParams{})
}

// handle records the delivery and acks. It never fails: a malformed payload
// is reported by verify, not retried forever.
func (d *demo) handle(_ context.Context, m processor.Delivery) error {
	msg, ok := parsePayload(m.Queue, m.Payload)
	d.rec.add(delivery{id: m.ID, queue: m.Queue, partition: m.Partition, seq: m.Seq, attempts: m.Attempts, msg: msg, malformed: !ok})
	return nil
}

// produce runs the producers until every transaction slot is taken.
func (d *demo) produce(ctx context.Context, ob *seqbox.Outbox, queues []string) error {
	c := d.cfg
	txs := (c.messages + c.batch - 1) / c.batch
	var mu sync.Mutex
	next := 0
	take := func() (int, bool) { // the next transaction's size
		mu.Lock()
		defer mu.Unlock()
		if next >= txs {
			return 0, false
		}
		n := min(c.batch, c.messages-next*c.batch)
		next++
		return n, true
	}
	keys := max(16, 4*c.partitions) // per queue: several keys per partition
	g, gctx := errgroup.WithContext(ctx)
	for p := range c.producers {
		g.Go(func() error {
			var counter int64
			for {
				n, ok := take()
				if !ok || gctx.Err() != nil {
					return gctx.Err()
				}
				// Group by queue, keeping enqueue order within each.
				byQueue := make(map[string][]sent)
				var order []string
				for range n {
					counter++
					q := queues[mrand.IntN(len(queues))]
					if _, seen := byQueue[q]; !seen {
						order = append(order, q)
					}
					byQueue[q] = append(byQueue[q], sent{queue: q, key: fmt.Sprintf("key%d", mrand.IntN(keys)), producer: p, counter: counter})
				}
				rollback := mrand.IntN(100) < c.rollbackPct
				var ids []outbox.MessageID
				var msgs []sent
				err := ob.Transaction(gctx, func(ctx context.Context, tx bun.Tx) error {
					ids, msgs = ids[:0], msgs[:0]
					for _, q := range order {
						batch := make([]outbox.Message, len(byQueue[q]))
						for i, m := range byQueue[q] {
							batch[i] = outbox.Message{Key: m.key, PayloadType: "demo.v1", Payload: m.payload()}
						}
						got, err := ob.EnqueueBatch(ctx, tx, q, batch)
						if err != nil {
							return err
						}
						ids = append(ids, got...)
						msgs = append(msgs, byQueue[q]...)
					}
					if rollback {
						return errRollback
					}
					return nil
				})
				switch {
				case err == nil:
					d.led.commit(ids, msgs)
				case errors.Is(err, errRollback):
					d.led.rollBack(ids)
				default:
					// The commit's outcome is unknown, so the checks could not be exact.
					return fmt.Errorf("producer %d: %w", p, err)
				}
			}
		})
	}
	return g.Wait()
}

// waitDelivered waits until the handler has seen committed distinct
// messages, bounded by --timeout.
func (d *demo) waitDelivered(ctx context.Context, committed int) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		got := int(d.rec.distinctCount.Load())
		if got >= committed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delivered %d of %d committed messages; gave up after %v: %w", got, committed, d.cfg.timeout, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// waitAcked checks with WaitProcessed that every committed message is acked
// in the database, not only seen by the handler.
func (d *demo) waitAcked(ctx context.Context, ob *seqbox.Outbox) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids := d.led.committedIDs()
	const chunk = 1000 // WaitProcessed sends the ids in one IN list
	for i := 0; i < len(ids); i += chunk {
		if err := ob.WaitProcessed(ctx, ids[i:min(i+chunk, len(ids))]...); err != nil {
			return fmt.Errorf("WaitProcessed: %w", err)
		}
	}
	return nil
}

// printBacklog shows the partitions with work left, to debug a stall.
func (d *demo) printBacklog(ob *seqbox.Outbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ob.Stats(ctx)
	if err != nil {
		fmt.Fprintf(d.out, "  stats: %v\n", err)
		return
	}
	for _, p := range st.Partitions {
		if p.Incoming == 0 && p.Unprocessed == 0 {
			continue
		}
		fmt.Fprintf(d.out, "  %s/%d: incoming=%d unprocessed=%d processed_seq=%d sequence=%d attempts=%d last_error=%q locked_until=%v next_attempt_at=%v\n",
			p.Queue, p.Partition, p.Incoming, p.Unprocessed, p.ProcessedSeq, p.Sequence, p.Attempts, p.LastError, p.LockedUntil, p.NextAttemptAt)
	}
}

// progress prints a status line every 500 ms on a terminal (redrawn with
// \r) or every second otherwise, until the returned func is called.
func (d *demo) progress(start time.Time) (done func()) {
	if d.cfg.quiet {
		return func() {}
	}
	tty := isTerminal(d.out)
	every := time.Second
	if tty {
		every = 500 * time.Millisecond
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		lastAt, lastCommitted, lastDelivered := start, int64(0), int64(0)
		for {
			select {
			case <-stop:
				if tty {
					fmt.Fprintln(d.out)
				}
				return
			case now := <-t.C:
				committed := d.led.committedCount.Load()
				delivered := d.rec.distinctCount.Load()
				secs := now.Sub(lastAt).Seconds()
				in, out := float64(committed-lastCommitted)/secs, float64(delivered-lastDelivered)/secs
				lastAt, lastCommitted, lastDelivered = now, committed, delivered
				line := fmt.Sprintf("%6.1fs  committed=%d rolled-back=%d delivered=%d backlog=%d  in %.0f msg/s, out %.0f msg/s",
					now.Sub(start).Seconds(), committed, d.led.rolledBackCount.Load(), delivered, max(0, committed-delivered), in, out)
				if tty {
					fmt.Fprintf(d.out, "\r%s%s", line, strings.Repeat(" ", 8)) // the padding erases a longer previous line
				} else {
					fmt.Fprintln(d.out, line)
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-finished
	}
}
