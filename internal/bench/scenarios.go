package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

const (
	queueName   = "bench"
	payloadType = "bench.v1"
	// Drain preload shape: bulk transactions from two producers.
	preloadBatch     = 1000
	preloadProducers = 2
	// drainTimeout bounds every wait for a backlog to be delivered; hitting
	// it means seqbox stalled or lost messages, which the error reports. A
	// 5M-message drain on a 2-core machine under other load took more than
	// the 5 minutes this once was.
	drainTimeout = 20 * time.Minute
	stopTimeout  = 30 * time.Second
)

// bencher holds what every run shares.
type bencher struct {
	db       *bun.DB
	opts     Options
	log      *slog.Logger // counts warnings and errors into logs
	logs     *logCounts
	progress *progress
	payload  []byte // generated once: the harness must not be the bottleneck
	server   func(ctx context.Context) serverCounters
}

func newBencher(db *bun.DB, opts Options) *bencher {
	payload := make([]byte, opts.Payload)
	_, _ = rand.Read(payload) // random, so no database can compress it away
	logs := &logCounts{}
	return &bencher{
		db: db, opts: opts, log: slog.New(newCountingHandler(opts.Logger.Handler(), logs)), logs: logs,
		progress: newProgress(opts.Progress), payload: payload,
		server: func(ctx context.Context) serverCounters { return readServerCounters(ctx, db) },
	}
}

// newPrefix names a run's tables, unique so that runs (and other users of
// a shared database) never share tables.
func newPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bench" + hex.EncodeToString(b[:]) + "_"
}

// builder configures an outbox on prefix with the library defaults; a nil
// handler makes it producer-only.
func (b *bencher) builder(prefix string, partitions int, h processor.Handler) *seqbox.Builder {
	bld := seqbox.New(b.db).TablePrefix(prefix).Migrate(true).Logger(b.log)
	var q []processor.QueueOption
	if n := b.opts.ProcessorBatch; n > 0 {
		q = append(q, processor.BatchSize(n))
	}
	bld.Queue(queueName, partitions, h, q...)
	if n := b.opts.SequencerWorkers; n > 0 {
		bld.SequencerWorkers(n)
	}
	if n := b.opts.SequencerBatch; n > 0 {
		bld.SequencerBatchSize(n)
	}
	if n := b.opts.ProcessorConcurrency; n > 0 {
		bld.ProcessorConcurrency(n)
	}
	if d := b.opts.RotateInterval; d != 0 {
		bld.RotateInterval(d)
	}
	if n := b.opts.RotateSize; n != 0 {
		bld.RotateSize(n)
	}
	return bld
}

// knobs reports the settings the runs use: the builder's defaults, with the
// single-writer adjustment Start makes on SQLite.
func (b *bencher) knobs(ctx context.Context) (Knobs, error) {
	d, err := dialects.Open(context.Background(), b.db, "bench_")
	if err != nil {
		return Knobs{}, fmt.Errorf("bench: dialect: %w", err)
	}
	// What b.builder sets, over the Builder's defaults.
	return Knobs{
		SequencerWorkers:            cmp.Or(b.opts.SequencerWorkers, d.Tuning().SequencerWorkers),
		SequencerBatchSize:          cmp.Or(b.opts.SequencerBatch, seqbox.SequencerBatchSizeDefault),
		SequencerMaxInnerIterations: seqbox.SequencerMaxIterationsDefault,
		ReconcileInterval:           seqbox.ReconcileIntervalDefault.String(),
		ProcessorConcurrency:        cmp.Or(b.opts.ProcessorConcurrency, seqbox.ProcessorConcurrencyDefault),
		ProcessorBatchSize:          cmp.Or(b.opts.ProcessorBatch, processor.BatchSizeDefault),
		ProcessorMode:               processor.ModeLeased.String(), PollInterval: seqbox.PollIntervalDefault.String(),
		Lease:          processor.LeaseDefault.String(),
		VacuumInterval: seqbox.VacuumIntervalDefault.String(), VacuumChunk: seqbox.VacuumChunkDefault,
		EnqueueChunkRows: seqbox.EnqueueChunkRowsDefault, EnqueueChunkBytes: seqbox.EnqueueChunkBytesDefault,
		MaybeDirtyWindow: seqbox.MaybeDirtyWindowDefault.String(),
		RotateInterval:   rotateKnob(cmp.Or(b.opts.RotateInterval, seqbox.RotateIntervalDefault)),
		RotateSize:       rotateSizeKnob(cmp.Or(b.opts.RotateSize, seqbox.RotateSizeDefault)),
	}, nil
}

// rotateKnob says how often the generation switches: never, or a duration.
func rotateKnob(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.String()
}

// rotateSizeKnob says at what size the generation switches: never, or a size.
func rotateSizeKnob(n int64) string {
	if n < 0 {
		return "never"
	}
	return fmtBytes(n)
}

// run is one outbox on fresh tables.
type run struct {
	ob         *seqbox.Outbox
	e          *engine.Outbox
	d          dialect.Dialect
	prefix     string
	partitions int
	stopped    bool
	// dedupKeys: every enqueued message gets a new DedupKey.
	dedupKeys bool
}

// start migrates fresh tables and starts an outbox on them (with no
// background task at all when producerOnly). On failure it drops what it
// created; otherwise the caller must call cleanup.
func (b *bencher) start(ctx context.Context, partitions int, h processor.Handler, producerOnly bool) (*run, error) {
	prefix := newPrefix()
	d, err := dialects.Open(context.Background(), b.db, prefix)
	if err != nil {
		return nil, fmt.Errorf("bench: dialect: %w", err)
	}
	r := &run{d: d, prefix: prefix, partitions: partitions}
	bld := b.builder(prefix, partitions, h)
	if producerOnly {
		bld.ProducerOnly()
	}
	var c engine.Capture
	if r.ob, err = bld.Start(engine.WithCapture(ctx, &c)); err != nil {
		r.drop(ctx)
		return nil, fmt.Errorf("bench: start outbox: %w", err)
	}
	r.e = c.Outbox
	return r, nil
}

// restart stops the outbox and starts another on the same tables.
func (b *bencher) restart(ctx context.Context, r *run, h processor.Handler) error {
	if err := r.stop(ctx); err != nil {
		return err
	}
	var c engine.Capture
	ob, err := b.builder(r.prefix, r.partitions, h).Migrate(false).Start(engine.WithCapture(ctx, &c))
	if err != nil {
		return fmt.Errorf("bench: start outbox: %w", err)
	}
	r.ob, r.e, r.stopped = ob, c.Outbox, false
	return nil
}

func (r *run) stop(ctx context.Context) error {
	if r.stopped || r.ob == nil {
		return nil
	}
	r.stopped = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := r.ob.Stop(ctx); err != nil {
		return fmt.Errorf("bench: stop outbox: %w", err)
	}
	return nil
}

// cleanup stops the outbox and drops the tables; it runs after an
// interrupt too, hence contexts of its own.
func (r *run) cleanup(ctx context.Context) error {
	err := r.stop(ctx)
	r.drop(ctx)
	return err
}

func (r *run) drop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	_ = r.d.SchemaDrop(ctx, &dialect.SchemaDropParams{})
}

// backlog is the sum over partitions of unsequenced and unacked messages.
func backlog(ctx context.Context, d dialect.Dialect) (incoming, unprocessed int64, err error) {
	ps, err := d.PartitionStats(ctx, &dialect.PartitionStatsParams{})
	if err != nil {
		return 0, 0, fmt.Errorf("bench: partition stats: %w", err)
	}
	for _, p := range ps {
		incoming += p.Incoming
		unprocessed += p.Sequence - p.ProcessedSeq
	}
	return incoming, unprocessed, nil
}

// waitDrained waits until the handler has seen want messages and the
// database shows nothing unsequenced or unacked, and returns that moment.
func waitDrained(ctx context.Context, d dialect.Dialect, handled *atomic.Int64, want int64) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	for {
		if handled.Load() >= want {
			at := time.Now() // the query sees the database as of its start
			in, un, err := backlog(ctx, d)
			if err == nil && in == 0 && un == 0 {
				return at, nil
			}
			if err != nil && ctx.Err() == nil {
				return time.Time{}, err
			}
		}
		select {
		case <-ctx.Done():
			in, un, _ := backlog(context.WithoutCancel(ctx), d)
			return time.Time{}, fmt.Errorf("bench: handled %d of %d messages, %d unsequenced and %d unacked left after %v: %w",
				handled.Load(), want, in, un, drainTimeout, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tableRows counts every seqbox table of d into into["<moment>.<table>"],
// in one statement so that the counts share one snapshot (vacuum may be
// deleting while they are taken).
func tableRows(ctx context.Context, d dialect.Dialect, moment string, into map[string]int64) error {
	t := d.Tables()
	names := t.All()
	var q strings.Builder
	args := make([]any, len(names))
	counts := make([]int64, len(names))
	dest := make([]any, len(names))
	q.WriteString("SELECT ")
	for i, name := range names {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(SELECT COUNT(*) FROM ?)")
		args[i], dest[i] = bun.Ident(name), &counts[i]
	}
	if err := d.DB().NewRaw(q.String(), args...).Scan(ctx, dest...); err != nil {
		return fmt.Errorf("bench: count rows of %s*: %w", t.Prefix, err)
	}
	for i, name := range names {
		into[moment+"."+strings.TrimPrefix(name, t.Prefix)] = counts[i]
	}
	return nil
}

// messages builds a reusable batch: EnqueueBatch copies what it needs into
// its own rows and keeps no reference, so one slice serves every transaction.
func (b *bencher) messages(n int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{PayloadType: payloadType, Payload: b.payload}
	}
	return msgs
}

// enqueueStep returns one producer's transaction: len(msgs) messages to
// random partitions of r through r.ob.Transaction. With a tracker it
// records the commit time of each id right after the commit.
func (b *bencher) enqueueStep(r *run, msgs []outbox.Message, tr *tracker) func(ctx context.Context) (int, error) {
	ob := r.ob
	return func(ctx context.Context) (int, error) {
		for i := range msgs {
			msgs[i].Partition = mrand.IntN(r.partitions)
			if r.dedupKeys {
				msgs[i].DedupKey = strconv.FormatUint(mrand.Uint64(), 36) + strconv.FormatUint(mrand.Uint64(), 36)
			}
		}
		var ids []outbox.MessageID
		err := ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
			var err error
			ids, err = ob.EnqueueBatch(ctx, tx, queueName, msgs)
			return err
		})
		if err != nil {
			return 0, err
		}
		if tr != nil {
			tr.committed(ids)
		}
		return len(msgs), nil
	}
}

// runLabel is "scenario variant run i/n" for progress and errors.
func (b *bencher) runLabel(scenario, variant string, i int) string {
	return fmt.Sprintf("%s %s run %d/%d", scenario, variant, i+1, b.opts.Runs)
}

// timed measures one rate: it runs fn with a live counter, prints the
// final rate when fn returns and adds the run's resource use to use.
func (b *bencher) timed(label string, use *usageStats, fn func(m *meter) (float64, error)) (float64, error) {
	m := meter{server: b.server}
	stop := b.progress.live(func(el time.Duration) string {
		n := m.count.Load()
		return fmt.Sprintf("%s: %5.1fs  %s msgs  %s msgs/s", label, el.Seconds(), fmtCount(float64(n)), fmtCount(float64(n)/el.Seconds()))
	})
	rate, err := fn(&m)
	stop()
	if err != nil {
		return 0, fmt.Errorf("bench: %s: %w", label, err)
	}
	line := fmt.Sprintf("%s: %s msgs/s", label, fmtCount(rate))
	if m.cpuOK {
		line += fmt.Sprintf("  (cpu: client %.0f%%, machine %.0f%%)", m.cpu.ClientPct, m.cpu.MachinePct)
	}
	b.progress.draw(line, true)
	b.log.Info("bench run", slog.String("run", label), slog.Float64("msgs_per_sec", rate),
		slog.Float64("cpu_client_pct", m.cpu.ClientPct), slog.Float64("cpu_machine_pct", m.cpu.MachinePct))
	use.add(&m)
	return rate, nil
}

// ------------------------------------------------------------ enqueue + baseline

// enqueueFigure measures one enqueue shape with seqbox and/or the plain
// baseline, alternating them run by run so both see the same drift.
func (b *bencher) enqueueFigure(ctx context.Context, scenario string, seqboxOn, baselineOn bool, producers, batch int) ([]Result, error) {
	variant := fmt.Sprintf("%d/tx, %s", batch, plural(producers, "producer"))
	var rates, baseRates, twoRowRates, writeRates, dedupRates []float64
	var seqShare []float64
	var use, baseUse, twoRowUse, writeUse, dedupUse usageStats
	writeVariant := variant + ", write path only"
	dedupVariant := writeVariant + ", dedup keys"
	for i := range b.opts.Runs {
		if seqboxOn {
			var share float64
			rate, err := b.timed(b.runLabel(scenario, variant, i), &use, func(m *meter) (float64, error) {
				var err error
				var rate float64
				rate, share, err = b.enqueueRun(ctx, producers, batch, false, false, m)
				return rate, err
			})
			if err != nil {
				return nil, err
			}
			rates, seqShare = append(rates, rate), append(seqShare, share)
			// The same enqueue in a producer-only process: the write path
			// alone (two rows per message), with no sequencer competing.
			rate, err = b.timed(b.runLabel(scenario, writeVariant, i), &writeUse, func(m *meter) (float64, error) {
				rate, _, err := b.enqueueRun(ctx, producers, batch, true, false, m)
				return rate, err
			})
			if err != nil {
				return nil, err
			}
			writeRates = append(writeRates, rate)
			// The write path again, every message with a new DedupKey: the
			// cost of idempotent enqueue (a claim and its read-back per key).
			rate, err = b.timed(b.runLabel(scenario, dedupVariant, i), &dedupUse, func(m *meter) (float64, error) {
				rate, _, err := b.enqueueRun(ctx, producers, batch, true, true, m)
				return rate, err
			})
			if err != nil {
				return nil, err
			}
			dedupRates = append(dedupRates, rate)
		}
		if baselineOn {
			rate, err := b.timed(b.runLabel(ScenarioBaseline, scenario+" "+variant, i), &baseUse, func(m *meter) (float64, error) {
				return b.baselineRun(ctx, producers, batch, m)
			})
			if err != nil {
				return nil, err
			}
			baseRates = append(baseRates, rate)
			rate, err = b.timed(b.runLabel(ScenarioBaseline, scenario+" "+variant+", two rows", i), &twoRowUse, func(m *meter) (float64, error) {
				return b.twoRowBaselineRun(ctx, producers, batch, m)
			})
			if err != nil {
				return nil, err
			}
			twoRowRates = append(twoRowRates, rate)
		}
	}
	var out []Result
	var base *Stat
	if baselineOn {
		s := newStat(baseRates)
		base = &s
	}
	if seqboxOn {
		r := Result{Scenario: scenario, Variant: variant, MsgsPerSec: newStat(rates), Baseline: base,
			Extra: map[string]any{"tx_per_sec": newStat(rates).Median / float64(batch), "sequenced_pct_at_end": seqShare}}
		if base != nil && base.Median > 0 {
			r.Ratio = r.MsgsPerSec.Median / base.Median
		}
		use.put(r.Extra)
		out = append(out, r)
		w := Result{Scenario: scenario, Variant: writeVariant, MsgsPerSec: newStat(writeRates), Baseline: base,
			Extra: map[string]any{"tx_per_sec": newStat(writeRates).Median / float64(batch)}}
		if base != nil && base.Median > 0 {
			w.Ratio = w.MsgsPerSec.Median / base.Median
		}
		if baselineOn {
			if two := newStat(twoRowRates).Median; two > 0 {
				w.Extra["vs_two_row_baseline"] = w.MsgsPerSec.Median / two
			}
		}
		writeUse.put(w.Extra)
		out = append(out, w)
		k := Result{Scenario: scenario, Variant: dedupVariant, MsgsPerSec: newStat(dedupRates), Baseline: base,
			Extra: map[string]any{"tx_per_sec": newStat(dedupRates).Median / float64(batch)}}
		if base != nil && base.Median > 0 {
			k.Ratio = k.MsgsPerSec.Median / base.Median
		}
		if w.MsgsPerSec.Median > 0 {
			k.Extra["vs_write_path"] = k.MsgsPerSec.Median / w.MsgsPerSec.Median
		}
		dedupUse.put(k.Extra)
		out = append(out, k)
	}
	if baselineOn {
		r := Result{Scenario: ScenarioBaseline, Variant: scenario + ": " + variant, MsgsPerSec: *base, Extra: map[string]any{}}
		baseUse.put(r.Extra)
		out = append(out, r)
		// The two-row floor, against the one-table baseline: what the
		// schema costs before any library code runs.
		two := Result{Scenario: ScenarioBaseline, Variant: scenario + ": " + variant + ", two rows (body + incoming, plain SQL)",
			MsgsPerSec: newStat(twoRowRates), Baseline: base, Extra: map[string]any{}}
		if base.Median > 0 {
			two.Ratio = two.MsgsPerSec.Median / base.Median
		}
		twoRowUse.put(two.Extra)
		out = append(out, two)
	}
	return out, nil
}

// enqueueRun is one timed enqueue run on an outbox whose queue has no
// handler: unless producerOnly, the sequencer still runs in-process, as it
// would in an application, and competes with the producers for the
// database. It also
// returns the share of the enqueued messages sequenced by the end, which
// shows whether the sequencer kept up.
func (b *bencher) enqueueRun(ctx context.Context, producers, batch int, producerOnly, dedupKeys bool, m *meter) (rate, sequencedPct float64, err error) {
	r, err := b.start(ctx, b.opts.Partitions, nil, producerOnly)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := r.cleanup(ctx); err == nil {
			err = cerr
		}
	}()
	r.dedupKeys = dedupKeys
	steps := make([]func(context.Context) (int, error), producers)
	for p := range steps {
		steps[p] = b.enqueueStep(r, b.messages(batch), nil)
	}
	m.begin(ctx)
	elapsed, err := produce(ctx, producers, b.opts.Duration, 0, &m.count, func(ctx context.Context, p int) (int, error) {
		return steps[p](ctx)
	})
	m.end(ctx)
	if err != nil {
		return 0, 0, err
	}
	c := r.ob.Counters()
	if c.Enqueued > 0 {
		sequencedPct = 100 * float64(c.Sequenced) / float64(c.Enqueued)
	}
	return float64(m.count.Load()) / elapsed.Seconds(), sequencedPct, nil
}

// baselineRun inserts the same rows with the same transaction sizes and
// concurrency as an enqueue run, as plain multi-row INSERTs into one
// ordinary table shaped like body: the cost of the write the application
// would do anyway. Ids are UUIDv7 like seqbox's, so the primary-key index
// sees the same insert pattern. On SQLite the transactions take the same
// in-process writer lock seqbox's do, so the ratio compares the writes and
// not two locking strategies.
func (b *bencher) baselineRun(ctx context.Context, producers, batch int, m *meter) (rate float64, err error) {
	return b.plainTableRun(ctx, producers, batch, m, "baseline", createBaseline,
		func(ctx context.Context, tx bun.Tx, table bun.Ident, rows []baseRow, now string) error {
			_, err := tx.NewRaw("INSERT INTO ? (id, payload_type, payload, headers, created_at) VALUES ?",
				table, baseValues(rows, now)).Exec(ctx)
			return err
		})
}

// plainTableRun creates a table (prefix + suffix) with create, runs
// plainInserts into it with insert and drops it.
func (b *bencher) plainTableRun(ctx context.Context, producers, batch int, m *meter, suffix string,
	create func(ctx context.Context, db *bun.DB, name dialect.Name, table string) error,
	insert func(ctx context.Context, tx bun.Tx, table bun.Ident, rows []baseRow, now string) error) (rate float64, err error) {
	prefix := newPrefix()
	d, err := dialects.Open(context.Background(), b.db, prefix)
	if err != nil {
		return 0, fmt.Errorf("bench: dialect: %w", err)
	}
	table := prefix + suffix
	if err := create(ctx, b.db, d.Name(), table); err != nil {
		return 0, err
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if _, derr := b.db.NewRaw("DROP TABLE IF EXISTS ?", bun.Ident(table)).Exec(dropCtx); derr != nil && err == nil {
			err = fmt.Errorf("bench: drop %s: %w", table, derr)
		}
	}()
	return b.plainInserts(ctx, d, producers, batch, m, func(ctx context.Context, tx bun.Tx, rows []baseRow, now string) error {
		return insert(ctx, tx, bun.Ident(table), rows, now)
	})
}

// twoRowBaselineRun writes what seqbox's enqueue writes, a body row and an
// incoming row per message into seqbox's own tables, as plain multi-row
// INSERTs with no library around them: the floor of the two-row schema.
// The write path's ratio to it is what seqbox adds; its ratio to the
// one-table baseline is what the schema costs.
func (b *bencher) twoRowBaselineRun(ctx context.Context, producers, batch int, m *meter) (rate float64, err error) {
	r, err := b.start(ctx, b.opts.Partitions, nil, true)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := r.cleanup(ctx); err == nil {
			err = cerr
		}
	}()
	pids := r.e.PartitionIDs(queueName)
	body, incoming := bun.Ident(r.prefix+"body"), bun.Ident(r.prefix+"incoming")
	if r.d.Name() == dialect.MySQL || r.d.Name() == dialect.SQLite {
		// body is a view of its generations there (docs/ROTATION.md): the
		// rows go to generation 0's table, as a fresh schema's enqueue does.
		body = bun.Ident(r.prefix + "body_g0")
	}
	return b.plainInserts(ctx, r.d, producers, batch, m, func(ctx context.Context, tx bun.Tx, rows []baseRow, now string) error {
		if _, err := tx.NewRaw("INSERT INTO ? (id, msg_key, payload_type, payload, headers, created_at) VALUES ?",
			body, baseValuesWith(rows, "(?, NULL, ?, ?, NULL, "+now+")", baseRow.bodyArgs)).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewRaw("INSERT INTO ? (partition_id, body_id) VALUES ?",
			incoming, baseValuesWith(rows, "(?, ?)", func(r baseRow) []any { return []any{pids[mrand.IntN(len(pids))], r.id} })).Exec(ctx)
		return err
	})
}

// plainInserts runs producers that each write batch rows per transaction,
// in seqbox's chunk sizes, through insert.
func (b *bencher) plainInserts(ctx context.Context, d dialect.Dialect, producers, batch int, m *meter,
	insert func(ctx context.Context, tx bun.Tx, rows []baseRow, now string) error) (float64, error) {
	now := nowExpr(d.Name())
	type producerState struct {
		ids  [][16]byte
		rows []baseRow
	}
	state := make([]producerState, producers)
	for p := range state {
		state[p].ids = make([][16]byte, batch)
		state[p].rows = make([]baseRow, batch)
	}
	m.begin(ctx)
	elapsed, err := produce(ctx, producers, b.opts.Duration, 0, &m.count, func(ctx context.Context, p int) (int, error) {
		st := &state[p]
		if err := uuidv7.Fill(st.ids, time.Now()); err != nil {
			return 0, err
		}
		for i := range st.rows {
			st.rows[i] = baseRow{id: st.ids[i][:], payloadType: payloadType, payload: b.payload}
		}
		unlock := d.LockWriter()
		defer unlock()
		err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			for _, chunk := range chunks(st.rows) {
				if err := insert(ctx, tx, chunk, now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return batch, nil
	})
	m.end(ctx)
	if err != nil {
		return 0, err
	}
	return float64(m.count.Load()) / elapsed.Seconds(), nil
}

type baseRow struct {
	id          []byte
	payloadType string
	payload     []byte
}

// chunks splits rows the way seqbox's enqueue does (rows and SQL bytes),
// so both sides send statements of the same size.
func chunks(rows []baseRow) [][]baseRow {
	var out [][]baseRow
	start, size := 0, 0
	for i := range rows {
		rowBytes := 2*len(rows[i].payload) + len(rows[i].payloadType) + 160
		if i > start && (i-start >= seqbox.EnqueueChunkRowsDefault || size+rowBytes > seqbox.EnqueueChunkBytesDefault) {
			out = append(out, rows[start:i])
			start, size = i, 0
		}
		size += rowBytes
	}
	return append(out, rows[start:])
}

// baseValues renders the VALUES list with bun placeholders; now is the
// dialect's timestamp expression, the same one seqbox writes into body.
func baseValues(rows []baseRow, now string) schema.QueryAppender {
	return baseValuesWith(rows, "(?, ?, ?, NULL, "+now+")", baseRow.bodyArgs)
}

// bodyArgs are a row's id, payload type and payload, the values both
// baselines write into a body-shaped row.
func (r baseRow) bodyArgs() []any { return []any{r.id, r.payloadType, r.payload} }

// baseValuesWith renders one tuple per row, its values from args.
func baseValuesWith(rows []baseRow, tuple string, args func(baseRow) []any) schema.QueryAppender {
	return appenderFunc(func(gen schema.QueryGen, b []byte) []byte {
		for i := range rows {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = gen.AppendQuery(b, tuple, args(rows[i])...)
		}
		return b
	})
}

type appenderFunc func(gen schema.QueryGen, b []byte) []byte

func (f appenderFunc) AppendQuery(gen schema.QueryGen, b []byte) ([]byte, error) {
	return f(gen, b), nil
}

func nowExpr(name dialect.Name) string {
	switch name {
	case dialect.MySQL:
		return "UTC_TIMESTAMP(6)"
	case dialect.SQLite:
		return "strftime('%Y-%m-%d %H:%M:%f', 'now')"
	default:
		return "now()"
	}
}

// createBaseline makes an ordinary table shaped like seqbox's body table.
func createBaseline(ctx context.Context, db *bun.DB, name dialect.Name, table string) error {
	ddl := map[dialect.Name]string{
		dialect.Postgres: "CREATE TABLE ? (id BYTEA PRIMARY KEY, payload_type VARCHAR(255) NOT NULL, payload BYTEA NOT NULL, " +
			"headers TEXT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())",
		dialect.MySQL: "CREATE TABLE ? (id BINARY(16) NOT NULL PRIMARY KEY, payload_type VARCHAR(255) CHARACTER SET ascii NOT NULL, " +
			"payload MEDIUMBLOB NOT NULL, headers MEDIUMTEXT NULL, created_at DATETIME(6) NOT NULL) ENGINE=InnoDB",
		dialect.SQLite: "CREATE TABLE ? (id BLOB NOT NULL PRIMARY KEY, payload_type TEXT NOT NULL, payload BLOB NOT NULL, " +
			"headers TEXT NULL, created_at TIMESTAMP NOT NULL)",
	}[name]
	if ddl == "" {
		return fmt.Errorf("bench: no baseline table for %s", name)
	}
	if _, err := db.NewRaw(ddl, bun.Ident(table)).Exec(ctx); err != nil {
		return fmt.Errorf("bench: create %s: %w", table, err)
	}
	return nil
}

// ------------------------------------------------------------ drain

// drainFigure measures how fast a preloaded backlog is delivered: one
// figure per size in DrainMessages. With several sizes every run drains
// each size in turn (so all see the same drift) and the later sizes carry
// the ratio of their rate to the first size's, run by run: a per-message
// cost that stays flat gives 1.
func (b *bencher) drainFigure(ctx context.Context, tableRowsInto map[string]int64) ([]Result, error) {
	sizes := b.opts.DrainMessages
	variant := func(size int) string { return fmt.Sprintf("%d msgs, %d partitions", size, b.opts.Partitions) }
	rates := make([][]float64, len(sizes))
	preloadRates := make([][]float64, len(sizes))
	atStart := make([][]map[string]int64, len(sizes))
	use := make([]usageStats, len(sizes))
	logs := make([]logDelta, len(sizes))
	for i := range b.opts.Runs {
		for s, size := range sizes {
			moment := "drain.done"
			if len(sizes) > 1 {
				moment = fmt.Sprintf("drain.%d.done", size)
			}
			var preload float64
			var start map[string]int64
			mark := b.logs.snapshot()
			rate, err := b.timed(b.runLabel(ScenarioDrain, variant(size), i), &use[s], func(m *meter) (float64, error) {
				var err error
				var rate float64
				rate, preload, start, err = b.drainRun(ctx, m, int64(size), moment, tableRowsInto)
				return rate, err
			})
			logs[s].add(b.logs, mark)
			if err != nil {
				return nil, err
			}
			rates[s], preloadRates[s] = append(rates[s], rate), append(preloadRates[s], preload)
			atStart[s] = append(atStart[s], start)
		}
	}
	out := make([]Result, len(sizes))
	for s, size := range sizes {
		stat := newStat(rates[s])
		res := Result{Scenario: ScenarioDrain, Variant: variant(size), MsgsPerSec: stat, Extra: map[string]any{
			"preload_msgs_per_sec": newStat(preloadRates[s]),
			"backlog_at_start":     atStart[s],
			"us_per_msg":           1e6 / stat.Median,
			"note":                 "preloaded by a ProducerOnly outbox (nothing sequenced); timed from Start of the consuming outbox to an empty backlog: sequencing and delivery",
		}}
		if s > 0 {
			res.Ratios = []Ratio{{
				Name: fmt.Sprintf("msgs/s %d/%d msgs", size, sizes[0]),
				Stat: ratioStat(rates[s], rates[0]),
			}}
		}
		use[s].put(res.Extra)
		logs[s].put(res.Extra)
		out[s] = res
	}
	return out, nil
}

// ratioStat divides run by run: each ratio compares two figures measured in
// the same run.
func ratioStat(num, den []float64) Stat {
	v := make([]float64, 0, len(num))
	for i := range min(len(num), len(den)) {
		if den[i] != 0 {
			v = append(v, num[i]/den[i])
		}
	}
	return newStat(v)
}

// drainRun preloads total messages with a ProducerOnly outbox, so the
// whole backlog starts unsequenced whatever the database (as after an
// outage of every consumer), then times a consuming outbox from Start until
// every partition shows nothing unsequenced and nothing unacked.
func (b *bencher) drainRun(ctx context.Context, m *meter, total int64, moment string, tableRowsInto map[string]int64) (rate, preloadRate float64, atStart map[string]int64, err error) {
	r, err := b.start(ctx, b.opts.Partitions, nil, true)
	if err != nil {
		return 0, 0, nil, err
	}
	defer func() {
		if cerr := r.cleanup(ctx); err == nil {
			err = cerr
		}
	}()
	var taken atomic.Int64
	steps := make([]func(context.Context) (int, error), preloadProducers)
	for p := range steps {
		batch := b.messages(preloadBatch)
		steps[p] = func(ctx context.Context) (int, error) {
			n := min(int64(preloadBatch), total-(taken.Add(preloadBatch)-preloadBatch))
			if n <= 0 {
				return 0, errEnough
			}
			return b.enqueueStep(r, batch[:n], nil)(ctx)
		}
	}
	// The live line counts preloaded messages first, then delivered ones.
	elapsed, err := produce(ctx, preloadProducers, 0, 0, &m.count, func(ctx context.Context, p int) (int, error) {
		return steps[p](ctx)
	})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("preload: %w", err)
	}
	preloadRate = float64(m.count.Load()) / elapsed.Seconds()
	m.count.Store(0)
	if err := r.stop(ctx); err != nil {
		return 0, 0, nil, err
	}
	in, un, err := backlog(ctx, r.d)
	if err != nil {
		return 0, 0, nil, err
	}
	if in+un != total {
		return 0, 0, nil, fmt.Errorf("bench: preloaded %d messages but the database holds %d (%d unsequenced, %d unacked)", total, in+un, in, un)
	}
	atStart = map[string]int64{"incoming": in, "unprocessed": un}

	m.begin(ctx)
	began := time.Now()
	if err := b.restart(ctx, r, processor.Leased(func(context.Context, processor.Delivery) error {
		m.count.Add(1)
		return nil
	})); err != nil {
		return 0, 0, nil, err
	}
	done, err := waitDrained(ctx, r.d, &m.count, total)
	m.end(ctx)
	if err != nil {
		return 0, 0, nil, err
	}
	rate = float64(total) / done.Sub(began).Seconds()
	if err := tableRows(ctx, r.d, moment, tableRowsInto); err != nil {
		return 0, 0, nil, err
	}
	return rate, preloadRate, atStart, nil
}

// ------------------------------------------------------------ sustained + latency

// pipelineRun is one run of producers and processors together.
type pipelineRun struct {
	committed      int64         // messages committed in the window
	window         time.Duration // how long the producers ran
	enqueueRate    float64       // committed msgs/s over the window
	deliveredRate  float64       // handled msgs/s over the window
	latency        LatencyStat
	early          int64
	backlogMax     int64
	backlogFinal   int64 // when the producers stopped
	backlogSeries  []int64
	unsequencedMax int64         // the largest incoming (not yet sequenced) part of a sample
	drainAfter     time.Duration // to deliver what was left after the window
	retried        int64
	duplicates     int64 // handler calls beyond the committed count: redeliveries
	// settle, startup and startupN: the messages committed in the window's
	// first settle, reported apart from latency (pipelineSpec.settle).
	settle   time.Duration
	startup  LatencyStat
	startupN int64
}

// throughput is the window's messages over the time it took to deliver
// all of them (window plus drain): in a short window the pipeline's
// start-up leaves the delivered rate near zero, this stays meaningful.
func (p pipelineRun) throughput() float64 {
	if d := (p.window + p.drainAfter).Seconds(); d > 0 {
		return float64(p.committed) / d
	}
	return 0
}

// backlogGrowth is the backlog when the producers stopped minus the first
// sample (a second in): what the window added beyond the start-up fill.
func (p pipelineRun) backlogGrowth() int64 {
	if len(p.backlogSeries) == 0 {
		return p.backlogFinal
	}
	return p.backlogFinal - p.backlogSeries[0]
}

// pipelineSpec shapes one pipeline run.
type pipelineSpec struct {
	partitions, producers, batch int
	window                       time.Duration
	// pace > 0 paces every producer to one transaction per pace.
	pace time.Duration
	// settle > 0 reports the latency of the messages committed in the
	// window's first settle apart (startup_latency_ms), not in the
	// figure's: a process starting to work many partitions opens its
	// connections and prepares its statements on them then, and at 1,024
	// partitions on PostgreSQL that start-up alone set a run's p99
	// (BENCHMARKS.md, "A pool's start").
	settle time.Duration
	// rowsMoment, when set, counts table rows into tableRowsInto when the
	// producers stop (<moment>.end) and after the rest is delivered
	// (<moment>.drained).
	rowsMoment    string
	tableRowsInto map[string]int64
	// hold, when set, is started just before the producers and released
	// when the window closes, after the backlog and windowEnd were read:
	// held-snapshot's unrelated open transaction.
	hold func(ctx context.Context, r *run) (release func(context.Context) error, err error)
	// windowEnd, when set, reads what the window left behind (before hold
	// is released).
	windowEnd func(ctx context.Context, r *run) error
	// watch, when set, runs beside the producers until the window closes:
	// the soak's sampler.
	watch func(ctx context.Context, w *pipelineWatch) error
}

// paceFor is how often each of producers commits one transaction of batch
// messages so that together they offer rate msgs/s (pipelineSpec.pace).
func paceFor(rate float64, producers, batch int) time.Duration {
	return time.Duration(float64(time.Second) * float64(producers*batch) / rate)
}

// pipelineWatch is what a watcher may read while a pipeline runs.
type pipelineWatch struct {
	r         *run
	tr        *tracker
	handled   *atomic.Int64 // handler calls so far
	committed *atomic.Int64 // messages committed in the window so far
	began     time.Time     // when the producers started
}

// pipelineRun runs producers against a consuming outbox for the window,
// sampling the backlog every second, then waits for the rest to be
// delivered. Latency covers every message committed in the window,
// including those delivered after it: cutting them off would hide the
// slowest ones.
func (b *bencher) pipelineRun(ctx context.Context, spec pipelineSpec, m *meter) (res pipelineRun, err error) {
	tr := newTracker()
	// The latency so far, also when the run fails: a pipeline that stalls
	// shows it there.
	defer func() {
		res.latency, res.early = tr.result()
		res.startup, res.startupN = tr.startupResult()
	}()
	res.settle = spec.settle
	var handled atomic.Int64
	r, err := b.start(ctx, spec.partitions, processor.Leased(func(_ context.Context, d processor.Delivery) error {
		tr.delivered(d.ID)
		handled.Add(1)
		return nil
	}), false)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.cleanup(ctx); err == nil {
			err = cerr
		}
	}()

	release := func(context.Context) error { return nil }
	if spec.hold != nil {
		if release, err = spec.hold(ctx, r); err != nil {
			return res, err
		}
	}
	released := false
	defer func() {
		if !released {
			_ = release(context.WithoutCancel(ctx))
		}
	}()

	// Backlog sampler (one sample per second of the window) and the
	// optional watcher, both stopped when the producers stop. The
	// per-second backlog is the bench's own count, committed minus
	// delivered: the database's (Stats) reads every partition, about 100 µs
	// each, and read once a second it was a sixth of what 1,024 partitions
	// added to the pipeline's database time (BENCHMARKS.md, "Where the time
	// goes at 1,024 partitions"). The database is still read for the part
	// not yet sequenced, paced so that the reads take at most a twentieth
	// of the window, and at the window's end for the final backlog.
	h0 := handled.Load()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers errgroup.Group
	watchers.Go(func() error {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var nextRead time.Time
		for {
			select {
			case <-watchCtx.Done():
				return nil
			case now := <-t.C:
				res.backlogSeries = append(res.backlogSeries, max(m.count.Load()-(handled.Load()-h0), 0))
				if now.Before(nextRead) {
					continue
				}
				in, _, err := backlog(watchCtx, r.d)
				if err != nil {
					if watchCtx.Err() != nil {
						return nil
					}
					return err
				}
				nextRead = time.Now().Add(20 * time.Since(now))
				res.unsequencedMax = max(res.unsequencedMax, in)
			}
		}
	})

	steps := make([]func(context.Context) (int, error), spec.producers)
	for p := range steps {
		steps[p] = b.enqueueStep(r, b.messages(spec.batch), tr)
	}
	m.begin(ctx)
	if spec.settle > 0 {
		tr.settleAfter(spec.settle)
	}
	if spec.watch != nil {
		w := &pipelineWatch{r: r, tr: tr, handled: &handled, committed: &m.count, began: time.Now()}
		watchers.Go(func() error {
			if err := spec.watch(watchCtx, w); err != nil && watchCtx.Err() == nil {
				return err
			}
			return nil
		})
	}
	elapsed, err := produce(ctx, spec.producers, spec.window, spec.pace, &m.count, func(ctx context.Context, p int) (int, error) {
		return steps[p](ctx)
	})
	m.end(ctx)
	h1 := handled.Load()
	stopWatch()
	if werr := watchers.Wait(); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return res, err
	}
	windowEnd := time.Now()
	committed := m.count.Load()
	res.committed, res.window = committed, elapsed
	res.enqueueRate = float64(committed) / elapsed.Seconds()
	res.deliveredRate = float64(h1-h0) / elapsed.Seconds()
	finalAt := time.Now()
	in, un, err := backlog(ctx, r.d)
	if err != nil {
		return res, err
	}
	res.backlogFinal = in + un
	for _, v := range append(res.backlogSeries, res.backlogFinal) {
		res.backlogMax = max(res.backlogMax, v)
	}
	if spec.rowsMoment != "" {
		if err := tableRows(ctx, r.d, spec.rowsMoment+".end", spec.tableRowsInto); err != nil {
			return res, err
		}
	}
	if spec.windowEnd != nil {
		if err := spec.windowEnd(ctx, r); err != nil {
			return res, err
		}
	}
	released = true
	if err := release(ctx); err != nil {
		return res, err
	}
	// An empty backlog means every committed message is acked already.
	done := finalAt
	if res.backlogFinal > 0 {
		if done, err = waitDrained(ctx, r.d, &handled, committed); err != nil {
			return res, err
		}
	}
	res.drainAfter = max(done.Sub(windowEnd), 0)
	if spec.rowsMoment != "" {
		if err := tableRows(ctx, r.d, spec.rowsMoment+".drained", spec.tableRowsInto); err != nil {
			return res, err
		}
	}
	res.retried = r.ob.Counters().Retried
	res.duplicates = handled.Load() - committed
	return res, nil
}

// sustainedSpec is the sustained shape: Batch per transaction, as fast as
// the producers go, for Duration.
func (b *bencher) sustainedSpec(partitions, producers int) pipelineSpec {
	return pipelineSpec{partitions: partitions, producers: producers, batch: b.opts.Batch, window: b.opts.Duration}
}

// latencySpec is the latency shape: LatencyRate offered by one-message
// transactions, for Duration. The messages of its first seconds are
// reported apart (latencySettle).
func (b *bencher) latencySpec(partitions, producers int) pipelineSpec {
	pace := paceFor(float64(b.opts.LatencyRate), producers, 1)
	return pipelineSpec{partitions: partitions, producers: producers, batch: 1, window: b.opts.Duration, pace: max(pace, time.Microsecond),
		settle: latencySettle(b.opts.Duration)}
}

// latencySettle is the start of a latency window reported apart: 2 s, or a
// fifth of a shorter window's length.
func latencySettle(window time.Duration) time.Duration {
	return min(2*time.Second, window/5)
}

func sustainedVariant(batch, producers int) string {
	return fmt.Sprintf("%d/tx, %s", batch, plural(producers, "producer"))
}

func (b *bencher) latencyVariant(producers int) string {
	return fmt.Sprintf("%d msgs/s offered, 1/tx, %s", b.opts.LatencyRate, plural(producers, "producer"))
}

// sustainedFigure: producers and processors together; the rate is what the
// handlers got through during the window.
func (b *bencher) sustainedFigure(ctx context.Context, producers int, tableRowsInto map[string]int64) (Result, error) {
	variant := sustainedVariant(b.opts.Batch, producers)
	spec := b.sustainedSpec(b.opts.Partitions, producers)
	spec.rowsMoment, spec.tableRowsInto = ScenarioSustained, tableRowsInto
	runs, use, err := b.pipelineFigure(ctx, ScenarioSustained, variant, spec, delivered)
	if err != nil {
		return Result{}, err
	}
	return sustainedResult(ScenarioSustained, variant, runs, use), nil
}

func sustainedResult(scenario, variant string, runs []pipelineRun, use *usageStats) Result {
	res := pipelineResult(scenario, variant, runs, delivered)
	use.put(res.Extra)
	res.Extra["enqueued_msgs_per_sec"] = statOf(runs, enqueued)
	return res
}

// latencyFigure: a fixed low rate of one-message transactions.
func (b *bencher) latencyFigure(ctx context.Context, producers int) (Result, error) {
	variant := b.latencyVariant(producers)
	runs, use, err := b.pipelineFigure(ctx, ScenarioLatency, variant, b.latencySpec(b.opts.Partitions, producers), enqueued)
	if err != nil {
		return Result{}, err
	}
	return latencyResult(ScenarioLatency, variant, runs, use), nil
}

// latencyResult: the rate is what was committed, below the offered rate
// when single-message transactions cannot keep the pace.
func latencyResult(scenario, variant string, runs []pipelineRun, use *usageStats) Result {
	res := pipelineResult(scenario, variant, runs, enqueued)
	use.put(res.Extra)
	res.Extra["delivered_msgs_per_sec"] = statOf(runs, delivered)
	return res
}

func delivered(p pipelineRun) float64 { return p.deliveredRate }
func enqueued(p pipelineRun) float64  { return p.enqueueRate }

// pipelineFigure measures spec Runs times; rate is the figure each run's
// progress line reports.
func (b *bencher) pipelineFigure(ctx context.Context, scenario, variant string, spec pipelineSpec,
	rate func(pipelineRun) float64) ([]pipelineRun, *usageStats, error) {
	var runs []pipelineRun
	var use usageStats
	for i := range b.opts.Runs {
		pr, err := b.pipelineOnce(ctx, b.runLabel(scenario, variant, i), &use, spec, rate)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, pr)
	}
	return runs, &use, nil
}

// pipelineOnce is one timed pipeline run, its resource use added to use.
func (b *bencher) pipelineOnce(ctx context.Context, label string, use *usageStats, spec pipelineSpec,
	rate func(pipelineRun) float64) (pipelineRun, error) {
	var pr pipelineRun
	_, err := b.timed(label, use, func(m *meter) (float64, error) {
		var err error
		pr, err = b.pipelineRun(ctx, spec, m)
		return rate(pr), err
	})
	return pr, err
}

func statOf(runs []pipelineRun, get func(pipelineRun) float64) Stat {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	return newStat(v)
}

func pipelineResult(scenario, variant string, runs []pipelineRun, rate func(pipelineRun) float64) Result {
	lat := make([]LatencyStat, len(runs))
	early, retried, duplicates := int64(0), int64(0), int64(0)
	var backlogMax, backlogFinal, unsequencedMax, drainMs []int64
	var series [][]int64
	for i, r := range runs {
		lat[i] = r.latency
		early += r.early
		retried += r.retried
		duplicates += r.duplicates
		backlogMax = append(backlogMax, r.backlogMax)
		unsequencedMax = append(unsequencedMax, r.unsequencedMax)
		backlogFinal = append(backlogFinal, r.backlogFinal)
		drainMs = append(drainMs, r.drainAfter.Milliseconds())
		series = append(series, r.backlogSeries)
	}
	res := Result{Scenario: scenario, Variant: variant, MsgsPerSec: statOf(runs, rate), Latency: medianLatency(lat),
		Extra: map[string]any{
			"early_deliveries":         early, // handler ran before the producer recorded the commit: counted as 0 ms
			"retried":                  retried,
			"duplicate_deliveries":     duplicates,
			"backlog_max":              backlogMax,
			"backlog_unsequenced_max":  unsequencedMax, // of backlog_max's samples, the part not yet sequenced
			"backlog_final":            backlogFinal,
			"backlog_per_second":       series,
			"drain_after_window_ms":    drainMs,
			"latency_includes_drain":   true,
			"latency_commit_reference": "time.Now() after ob.Transaction returned",
		}}
	if len(runs) > 0 && runs[0].settle > 0 {
		startup := make([]LatencyStat, len(runs))
		n := make([]int64, len(runs))
		for i, r := range runs {
			startup[i], n[i] = r.startup, r.startupN
		}
		res.Extra["latency_excludes_first"] = runs[0].settle.String() // of the window: the start-up's, below
		res.Extra["startup_latency_ms"] = medianLatency(startup)
		res.Extra["startup_messages"] = n
	}
	return res
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
