package seqboxcli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
	dsnutil "github.com/seqbox/seqbox/internal/dsn"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// demoConfig is the demo's command line.
type demoConfig struct {
	dsn         string
	stress      bool
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
	fs.BoolVar(&c.stress, "stress", false, "run the stress test instead of the tour (the flags marked --stress apply only to it)")
	fs.IntVar(&c.messages, "messages", 100000, "--stress: messages to enqueue, rolled-back ones included")
	fs.IntVar(&c.queues, "queues", 3, "--stress: queues")
	fs.IntVar(&c.partitions, "partitions", 8, "--stress: partitions per queue (1..4096)")
	fs.IntVar(&c.producers, "producers", 4, "--stress: concurrent producer goroutines")
	fs.IntVar(&c.batch, "batch", 100, "--stress: messages per producer transaction")
	fs.IntVar(&c.rollbackPct, "rollback-pct", 10, "--stress: percentage of transactions rolled back after enqueueing (0..100)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long to wait for delivery once the messages are committed")
	fs.BoolVar(&c.keep, "keep", false, "--stress: keep the database (temporary file) or the tables (--dsn) afterwards")
	fs.BoolVar(&c.quiet, "quiet", false, "--stress: print no progress lines")
	c.logLevel = slog.LevelWarn
	fs.TextVar(&c.logLevel, "log-level", c.logLevel, "level of the outbox's log on stderr: debug, info, warn or error (the tour logs nothing unless set)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: seqbox demo [flags]

A first look at seqbox. It registers a queue "orders" with 4 partitions,
enqueues a few customers' order events in one transaction, and prints each
delivery as the handler sees it: every customer's events in order, one
handler failure retried, one message rejected into dead letters. Then it
prints the commands to look at what is left (seqbox status, seqbox dlq …)
against the same database, which it leaves in place.

With no --dsn it needs no set-up: it uses a fresh SQLite file in a temporary
directory. With --dsn it uses tables of its own, `+tourPrefix+`*, and replaces
an earlier run's.

--stress runs a stress test instead: producers enqueue --messages in
transactions, a share of which roll back, and consumers run on every
partition of every queue; then it checks that every committed message was
delivered once, no rolled-back one was, and each partition saw gap-free seqs
1, 2, 3, … in order. With --dsn it creates tables under a table prefix of its
own and drops them at the end.

Exit status 0 if every check passed, 1 if one failed, 2 on a usage error.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nDatabases (--dsn):\n"+dsnHelp)
	}
	return fs
}

// stressOnly reports the flags that only the stress run reads.
func stressOnly(name string) bool {
	switch name {
	case "messages", "queues", "partitions", "producers", "batch", "rollback-pct", "keep", "quiet":
		return true
	}
	return false
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
	logSet := false
	var misplaced []string
	fs.Visit(func(f *flag.Flag) {
		logSet = logSet || f.Name == "log-level"
		if !c.stress && stressOnly(f.Name) {
			misplaced = append(misplaced, "--"+f.Name)
		}
	})
	if len(misplaced) > 0 {
		fmt.Fprintf(s.stderr, "seqbox demo: %s only with --stress\n", strings.Join(misplaced, ", "))
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
	if !c.stress {
		t := &tour{cfg: c, out: s.stdout, errOut: s.stderr, logSet: logSet}
		return t.run(ctx)
	}
	d := &demo{cfg: c, out: s.stdout, errOut: s.stderr, rec: newRecorder(), led: newLedger()}
	return d.run(ctx)
}

// ---------------------------------------------------------------- tour

// tourPrefix is the tour's table prefix on a database named with --dsn: its
// own, so the tour never touches an application's seqbox_* tables, and
// fixed, so the commands it prints stay the same from run to run.
const tourPrefix = "seqbox_demo_"

// The tour's one queue.
const (
	tourQueue      = "orders"
	tourPartitions = 4
)

// tourEvent is one message of the tour's little shop.
type tourEvent struct {
	customer string // the message's key
	event    string // created, paid or shipped
	payload  string
}

func (e tourEvent) payloadType() string { return "order." + e.event + ".v1" }

// tourEvents are the tour's messages in enqueue order: three customers'
// orders going through created, paid and shipped, and an order of an item
// the shop does not sell. Alice and dave share a partition.
func tourEvents() []tourEvent {
	return []tourEvent{
		{"alice", "created", `{"order":1001,"item":"coffee beans"}`},
		{"bob", "created", `{"order":1002,"item":"teapot"}`},
		{"carol", "created", `{"order":1003,"item":"mug"}`},
		{"alice", "paid", `{"order":1001,"amount":"12.50 EUR"}`},
		{"bob", "paid", `{"order":1002,"amount":"34.00 EUR"}`},
		{"dave", "created", `{"order":1004,"item":"unicorn"}`},
		{"carol", "paid", `{"order":1003,"amount":"8.90 EUR"}`},
		{"alice", "shipped", `{"order":1001,"carrier":"DHL"}`},
		{"bob", "shipped", `{"order":1002,"carrier":"UPS"}`},
	}
}

// shop is the tour's handler logic, as an application's would be. An order
// of an item the shop does not sell can never succeed: Reject sends it to
// dead letters at once. A payment service that timed out may answer next
// time: a plain error, so seqbox retries it.
func shop(d processor.Delivery) error {
	var order struct {
		Item string `json:"item"`
	}
	if err := json.Unmarshal(d.Payload, &order); err != nil {
		return processor.Reject(fmt.Errorf("not an order: %w", err))
	}
	switch d.PayloadType {
	case "order.created.v1":
		if !slices.Contains([]string{"coffee beans", "teapot", "mug"}, order.Item) {
			return processor.Reject(fmt.Errorf("unknown item %q", order.Item))
		}
	case "order.paid.v1":
		if d.Key == "bob" && d.Attempts == 0 { // the tour's one passing failure
			return errors.New("payment service timed out")
		}
	}
	return nil
}

// tour is one run of the first-hour tour.
type tour struct {
	cfg         demoConfig
	out, errOut io.Writer
	logSet      bool // --log-level given; otherwise the outbox logs nothing, so the tour reads cleanly

	mu    sync.Mutex // the handler runs on several partitions at once
	calls []tourCall
}

// tourCall is one handler call as the handler saw it.
type tourCall struct {
	partition int
	seq       int64
	key, typ  string
	attempts  int
	err       error
}

// printf writes to the tour's output; the handler writes there too, from
// the processors' goroutines.
func (t *tour) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, format, args...)
}

func (t *tour) failf(format string, args ...any) int {
	fmt.Fprintf(t.errOut, "seqbox demo: "+format+"\n", args...)
	return ExitFailure
}

// handle runs shop and prints the call as the handler saw it.
func (t *tour) handle(_ context.Context, d processor.Delivery) error {
	err := shop(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, tourCall{partition: d.Partition, seq: d.Seq, key: d.Key, typ: d.PayloadType, attempts: d.Attempts, err: err})
	attempt := ""
	if d.Attempts > 0 {
		attempt = fmt.Sprintf("  (attempt %d)", d.Attempts+1)
	}
	fmt.Fprintf(t.out, "   %s/%d  seq %d  key %-6s %-17s %s%s\n", d.Queue, d.Partition, d.Seq, d.Key, d.PayloadType, d.Payload, attempt)
	var rejected *processor.RejectError
	switch {
	case errors.As(err, &rejected):
		fmt.Fprintf(t.out, "        -> rejected (%v): now a dead letter; partition %d goes on with its next message\n", rejected.Err, d.Partition)
	case err != nil:
		fmt.Fprintf(t.out, "        -> failed (%v): retried after a backoff; partition %d waits, so %s's next message cannot overtake it\n",
			err, d.Partition, d.Key)
	}
	return err
}

func (t *tour) run(ctx context.Context) int {
	dsn, prefix, dir := t.cfg.dsn, dialect.DefaultPrefix, ""
	where := ""
	if dsn == "" {
		// A fresh file each run, left in place for the commands printed at the end.
		var err error
		if dir, err = os.MkdirTemp("", "seqbox-demo-"); err != nil {
			return t.failf("%v", err)
		}
		path := filepath.Join(dir, "demo.db")
		dsn, where = "sqlite:"+path, "a new SQLite file, "+path
	} else {
		prefix = tourPrefix
		where = fmt.Sprintf("%s, tables %s*", dsnutil.Redact(dsn), prefix)
	}
	db, err := OpenDB(ctx, dsn)
	if err != nil {
		return t.failf("%v", err)
	}
	defer db.Close()
	if t.cfg.dsn != "" {
		// A fresh start each run: seqs begin at 1 and the dead letter is this run's.
		if err := dropTables(ctx, db, prefix); err != nil {
			return t.failf("reset tables %s*: %v", prefix, err)
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if t.logSet {
		logger = slog.New(slog.NewTextHandler(t.errOut, &slog.HandlerOptions{Level: t.cfg.logLevel}))
	}

	t.printf("seqbox demo: a first look at seqbox, on %s\n\n", where)
	t.printf("1. Start an outbox with one queue, %q, of %d partitions. A message's key picks its\n"+
		"   partition, so one customer's messages keep their order; partitions run in parallel.\n\n", tourQueue, tourPartitions)
	ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(logger).PollInterval(100*time.Millisecond).
		Queue(tourQueue, tourPartitions, processor.Leased(t.handle), processor.Retry(100*time.Millisecond, time.Second)).
		Start(ctx)
	if err != nil {
		return t.failf("start: %v", err)
	}
	stop, stopAtExit := stopper(ctx, ob)
	defer stopAtExit()

	events := tourEvents()
	t.printf("2. Enqueue %d messages in one transaction. In an application the same transaction\n"+
		"   writes the orders themselves: the messages exist if and only if it commits.\n", len(events))
	msgs := make([]outbox.Message, len(events))
	for i, e := range events {
		msgs[i] = outbox.Message{Key: e.customer, PayloadType: e.payloadType(), Payload: []byte(e.payload)}
		t.printf("   key %-6s %-17s %-37s -> partition %d\n", e.customer, e.payloadType(), e.payload,
			outbox.PartitionForKey(e.customer, tourPartitions))
	}
	t.printf("\n3. Commit. The handler gets each message, with its queue/partition and its seq there:\n")
	var ids []outbox.MessageID
	err = ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, tourQueue, msgs)
		return err
	})
	if err != nil {
		return t.failf("enqueue: %v", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, t.cfg.timeout)
	err = ob.WaitProcessed(waitCtx, ids...)
	cancel()
	if err != nil {
		return t.failf("waiting for the handler: %v (seqbox status --partitions --dsn … shows where it stands)", err)
	}
	if err := stop(); err != nil {
		return t.failf("stop: %v", err)
	}
	counters := ob.Counters()

	t.printf("\n4. Per customer, as the handler got them: in the order enqueued, seqs rising. Customers who\n"+
		"   share a partition share its seqs (alice and dave, partition %d): one line, one order.\n",
		outbox.PartitionForKey("alice", tourPartitions))
	problems := t.perKey(events)
	adm, err := seqbox.NewAdmin(ctx, db, prefix)
	if err != nil {
		return t.failf("%v", err)
	}
	letters := adm.DeadLetters()
	page, err := letters.List(ctx, deadletter.Filter{Queue: tourQueue, Statuses: []deadletter.Status{deadletter.StatusPending}}, 0, 10)
	if err != nil {
		return t.failf("dead letters: %v", err)
	}
	t.printf("\n5. The outbox counted %d delivered, %d retried, %d dead-lettered. Pending dead letters:\n",
		counters.Delivered, counters.Retried, counters.DeadLettered)
	for _, l := range page.Letters {
		t.printf("   id %d: %s/%d seq %d, key %s, %s: %s\n", l.ID, l.Queue, l.Partition, l.Seq, l.Key, l.PayloadType, l.LastError)
	}
	if len(page.Letters) != 1 {
		problems = append(problems, fmt.Sprintf("want 1 pending dead letter, found %d", len(page.Letters)))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			t.printf("FAILED: %s\n", p)
		}
		return ExitFailure
	}
	t.nextSteps(dsn, prefix, dir, page.Letters[0])
	return ExitOK
}

// perKey prints each customer's messages as the handler got them and
// returns what breaks the order they were enqueued in.
func (t *tour) perKey(events []tourEvent) (problems []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys []string
	want := map[string][]string{} // key → payload types in enqueue order
	for _, e := range events {
		if _, ok := want[e.customer]; !ok {
			keys = append(keys, e.customer)
		}
		want[e.customer] = append(want[e.customer], e.payloadType())
	}
	for _, key := range keys {
		var got, steps []string
		partition := -1
		lastSeq := int64(0)
		for _, c := range t.calls {
			if c.key != key {
				continue
			}
			partition = c.partition
			if c.seq < lastSeq {
				problems = append(problems, fmt.Sprintf("key %s: seq %d after seq %d", key, c.seq, lastSeq))
			}
			lastSeq = c.seq
			var rejected *processor.RejectError
			step := fmt.Sprintf("seq %d %s", c.seq, strings.TrimSuffix(strings.TrimPrefix(c.typ, "order."), ".v1"))
			switch {
			case errors.As(c.err, &rejected):
				step += " (rejected: a dead letter)"
			case c.err != nil:
				continue // the retry that follows is the delivery
			case c.attempts > 0:
				step += fmt.Sprintf(" (on attempt %d)", c.attempts+1)
			}
			got = append(got, c.typ)
			steps = append(steps, step)
		}
		fmt.Fprintf(t.out, "   %-6s partition %d: %s\n", key, partition, strings.Join(steps, ", "))
		if !slices.Equal(got, want[key]) {
			problems = append(problems, fmt.Sprintf("key %s: handled %v, enqueued %v", key, got, want[key]))
		}
	}
	return problems
}

// nextSteps prints the commands to try against the database just used,
// each with the exact --dsn, runnable as pasted.
func (t *tour) nextSteps(dsn, prefix, dir string, letter deadletter.Letter) {
	db := []string{"--dsn", dsn}
	if prefix != dialect.DefaultPrefix {
		db = append(db, "--prefix", prefix)
	}
	id := strconv.FormatInt(letter.ID, 10)
	steps := []struct {
		why  string
		args []string
	}{
		{"per queue: messages waiting, the oldest one's age, retrying partitions, dead letters", []string{"status"}},
		{"the same per partition, with its state and last error", []string{"status", "--partitions"}},
		{"the dead letters, with the error that put each there", []string{"dlq", "list"}},
		{"one dead letter in full: payload, headers, error", []string{"dlq", "show", letter.MessageID.String()}},
		{"what a replay would do (commands that change something ask for --yes)", []string{"dlq", "replay", "--id", id}},
		{"replay it: a copy joins the tail of its partition (with no outbox running, status shows it waiting)",
			[]string{"dlq", "replay", "--id", id, "--yes"}},
	}
	t.printf("\nNext, try these against the same database (nothing runs now; the tables stay):\n\n")
	for _, s := range steps {
		args := append(append([]string{"seqbox", s.args[0]}, s.args[1:]...), db...)
		if s.args[0] == "dlq" {
			args = append(append([]string{"seqbox", "dlq", s.args[1]}, db...), s.args[2:]...)
		}
		t.printf("  # %s\n  %s\n", s.why, shellJoin(args))
	}
	t.printf("\nIn a checkout of seqbox, `go run ./cmd/seqbox` stands for `seqbox`.\n")
	if dir != "" {
		t.printf("The database is the SQLite file %s; remove %s when done.\n", strings.TrimPrefix(dsn, "sqlite:"), dir)
	} else {
		t.printf("The next run of the tour on this database replaces the tables %s*.\n", prefix)
	}
	t.printf("The tour's code is cmd/seqbox/seqboxcli/demo.go; a minimal program is Example in example_test.go;\n" +
		"seqbox demo --stress runs a stress test with verification.\n")
}

// shellJoin quotes args for a POSIX shell, only where needed, so a pasted
// command runs as printed (a DSN's ? and & included).
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		safe := a != ""
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
				safe = false
				break
			}
		}
		if safe {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// ---------------------------------------------------------------- stress

// demo is one stress run.
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
	stop, stopAtExit := stopper(ctx, ob)
	defer stopAtExit()

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
	dl, err := dialects.Open(ctx, db, prefix)
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

// stopper returns stop, which stops ob (waiting up to 30 s for in-flight
// batches, even when ctx has ended), and atExit, which stops it unless stop
// already ran.
func stopper(ctx context.Context, ob *seqbox.Outbox) (stop func() error, atExit func()) {
	stopped := false
	stop = func() error {
		stopped = true
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return ob.Stop(stopCtx)
	}
	return stop, func() {
		if !stopped {
			_ = stop()
		}
	}
}
