// Package bench is the measuring instrument behind `seqbox bench`: it runs
// seqbox's enqueue, drain, sustained-load and latency scenarios against one
// database, each on fresh tables, repeats every figure and reports the
// median with its min–max, next to a plain-INSERT baseline on the same
// database and the machine, database settings and seqbox knobs that decide
// the answer.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	dsnutil "github.com/seqbox/seqbox/internal/dsn"
	"github.com/seqbox/seqbox/outbox"
)

// Scenario names, as accepted in Options.Scenarios.
const (
	ScenarioEnqueueBatch  = "enqueue-batch"
	ScenarioEnqueueSingle = "enqueue-single"
	ScenarioDrain         = "drain"
	ScenarioSustained     = "sustained"
	ScenarioLatency       = "latency"
	ScenarioBaseline      = "baseline"
)

// AllScenarios lists every scenario in the order Run measures them.
func AllScenarios() []string {
	return []string{ScenarioEnqueueBatch, ScenarioEnqueueSingle, ScenarioDrain, ScenarioSustained, ScenarioLatency, ScenarioBaseline}
}

// Defaults of Options.
const (
	DurationDefault      = 10 * time.Second
	PartitionsDefault    = 16
	PayloadDefault       = 256
	BatchDefault         = 100
	RunsDefault          = 3
	DrainMessagesDefault = 200000
	LatencyRateDefault   = 1000
)

// ErrInvalidOptions matches every Options validation error.
var ErrInvalidOptions = errors.New("bench: invalid options")

// Options configure a benchmark. Zero fields take their defaults.
type Options struct {
	// DSN is the database: "" runs on an embedded SQLite file in a
	// temporary directory; otherwise whatever Open accepts (postgres://…,
	// mysql://…, sqlite:path).
	DSN string `json:"dsn"`
	// Open opens DSN (the caller owns DSN parsing and driver settings).
	// Required. Run closes the database it returns.
	Open func(ctx context.Context, dsn string) (*bun.DB, error) `json:"-"`
	// Scenarios is a subset of AllScenarios; empty means all. "baseline"
	// measures the plain-INSERT figures of the enqueue scenarios selected
	// with it, or of both when it is selected alone.
	Scenarios []string `json:"scenarios,omitempty"`
	// Duration is the length of each timed run. Defaults to 10s.
	Duration time.Duration `json:"duration_ns"`
	// Partitions of the benchmark queue. Defaults to 16.
	Partitions int `json:"partitions"`
	// Payload is the payload size in bytes. Defaults to 256.
	Payload int `json:"payload_bytes"`
	// Producers overrides every scenario's producer count (enqueue-batch
	// 1 and 4, enqueue-single 1 and 8, sustained and latency 4).
	Producers int `json:"producers,omitempty"`
	// Batch is messages per transaction in enqueue-batch and sustained.
	// Defaults to 100.
	Batch int `json:"batch"`
	// Runs is how many times each figure is measured. Defaults to 3.
	Runs int `json:"runs"`
	// DrainMessages is the backlog the drain scenario preloads. Defaults to 200000.
	DrainMessages int `json:"drain_messages"`
	// LatencyRate is the latency scenario's offered rate in msgs/s. Defaults to 1000.
	LatencyRate int `json:"latency_rate"`
	// Knob overrides; 0 keeps the library default. They let one window
	// compare settings (A/B) with the same harness.
	SequencerWorkers     int `json:"sequencer_workers,omitempty"`
	SequencerBatch       int `json:"sequencer_batch,omitempty"`
	ProcessorConcurrency int `json:"processor_concurrency,omitempty"`
	ProcessorBatch       int `json:"processor_batch,omitempty"`
	// Progress receives a live progress line redrawn with "\r"; nil for none.
	Progress io.Writer `json:"-"`
	// Logger receives the outbox's and the benchmark's log; nil discards it.
	Logger *slog.Logger `json:"-"`
}

func (o Options) withDefaults() Options {
	if len(o.Scenarios) == 0 {
		o.Scenarios = AllScenarios()
	}
	o.Duration = cmp.Or(o.Duration, DurationDefault)
	o.Partitions = cmp.Or(o.Partitions, PartitionsDefault)
	o.Payload = cmp.Or(o.Payload, PayloadDefault)
	o.Batch = cmp.Or(o.Batch, BatchDefault)
	o.Runs = cmp.Or(o.Runs, RunsDefault)
	o.DrainMessages = cmp.Or(o.DrainMessages, DrainMessagesDefault)
	o.LatencyRate = cmp.Or(o.LatencyRate, LatencyRateDefault)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (o Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(AllScenarios(), s) {
			return bad("unknown scenario %q (want %s)", s, strings.Join(AllScenarios(), ", "))
		}
	}
	switch {
	case o.Open == nil:
		return bad("Open is required")
	case o.Duration < 0:
		return bad("duration %v: must be > 0", o.Duration)
	case o.Partitions < outbox.MinPartitions || o.Partitions > outbox.MaxPartitions:
		return bad("partitions %d: must be %d..%d", o.Partitions, outbox.MinPartitions, outbox.MaxPartitions)
	case o.Payload < 0 || o.Payload > outbox.MaxPayloadBytesDefault:
		return bad("payload %d: must be 1..%d bytes", o.Payload, outbox.MaxPayloadBytesDefault)
	case o.SequencerWorkers < 0 || o.SequencerBatch < 0 || o.ProcessorConcurrency < 0 || o.ProcessorBatch < 0:
		return bad("knob overrides must be >= 0 (0 keeps the default)")
	case o.Producers < 0 || o.Producers > 1000:
		return bad("producers %d: must be 0 (scenario default) or 1..1000", o.Producers)
	case o.Batch < 1 || o.Batch > 100000:
		return bad("batch %d: must be 1..100000", o.Batch)
	case o.Runs < 1 || o.Runs > 1000:
		return bad("runs %d: must be 1..1000", o.Runs)
	case o.DrainMessages < 1:
		return bad("drain messages %d: must be >= 1", o.DrainMessages)
	case o.LatencyRate < 1:
		return bad("latency rate %d: must be >= 1 msg/s", o.LatencyRate)
	}
	return nil
}

func (o Options) has(scenario string) bool { return slices.Contains(o.Scenarios, scenario) }

// producers is the override when set, else the scenario's default.
func (o Options) producers(def ...int) []int {
	if o.Producers > 0 {
		return []int{o.Producers}
	}
	return def
}

// Report is the outcome of Run.
type Report struct {
	Machine  Machine  `json:"machine"`
	Database Database `json:"database"`
	Knobs    Knobs    `json:"knobs"`
	// Options are the options used, defaults filled, password redacted.
	Options Options  `json:"options"`
	Results []Result `json:"results"`
	// TableRows are row counts of every seqbox table, keyed
	// "<moment>.<table without prefix>": sustained.end (when the producers
	// stopped), sustained.drained (after delivering the rest) and
	// drain.done (after the drain scenario), each from its last run.
	TableRows map[string]int64 `json:"table_rows,omitempty"`
	// PeakRSSBytes is the process's peak resident set (VmHWM) at the end;
	// 0 where /proc is missing. It covers the whole process, embedded
	// SQLite included.
	PeakRSSBytes int64         `json:"peak_rss_bytes"`
	StartedAt    time.Time     `json:"started_at"`
	Duration     time.Duration `json:"duration_ns"`
}

// Machine describes where the benchmark ran (client and, usually, server).
type Machine struct {
	Cores         int    `json:"cores"`
	CPUModel      string `json:"cpu_model,omitempty"`
	MemTotalBytes int64  `json:"mem_total_bytes"`
	GOOS          string `json:"goos"`
	GOARCH        string `json:"goarch"`
	GoVersion     string `json:"go_version"`
}

// Database identifies the server and the settings that change the answer.
type Database struct {
	// Name is postgres, mysql, mariadb or sqlite.
	Name     string            `json:"name"`
	Version  string            `json:"version"`
	Driver   string            `json:"driver"`
	Settings map[string]string `json:"settings"`
}

// Knobs are the seqbox settings every run used (the library defaults).
type Knobs struct {
	SequencerWorkers            int    `json:"sequencer_workers"`
	SequencerBatchSize          int    `json:"sequencer_batch_size"`
	SequencerMaxInnerIterations int    `json:"sequencer_max_inner_iterations"`
	ReconcileInterval           string `json:"reconcile_interval"`
	ProcessorConcurrency        int    `json:"processor_concurrency"`
	ProcessorBatchSize          int    `json:"processor_batch_size"`
	ProcessorMode               string `json:"processor_mode"`
	PollInterval                string `json:"poll_interval"`
	Lease                       string `json:"lease"`
	VacuumInterval              string `json:"vacuum_interval"`
	VacuumChunk                 int    `json:"vacuum_chunk"`
	EnqueueChunkRows            int    `json:"enqueue_chunk_rows"`
	EnqueueChunkBytes           int    `json:"enqueue_chunk_bytes"`
	MaybeDirtyWindow            string `json:"maybe_dirty_window"`
}

// Result is one figure: a scenario in one variant, measured Runs times.
type Result struct {
	Scenario string `json:"scenario"`
	// Variant names the shape, e.g. "100/tx, 4 producers".
	Variant    string `json:"variant"`
	MsgsPerSec Stat   `json:"msgs_per_sec"`
	// Baseline is the plain-INSERT figure of the same shape, if measured.
	Baseline *Stat `json:"baseline,omitempty"`
	// Ratio is MsgsPerSec.Median / Baseline.Median; 0 without a baseline.
	Ratio float64 `json:"ratio,omitempty"`
	// Latency is commit → handler latency (medians over runs).
	Latency *LatencyStat   `json:"latency,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
}

// Stat summarises one figure over runs.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Runs   []float64 `json:"runs"`
}

// LatencyStat is commit → handler latency in milliseconds; each field is
// the median over runs of that run's percentile.
type LatencyStat struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// Samples is the number of deliveries measured, over all runs.
	Samples int64 `json:"samples"`
}

// Run measures the selected scenarios and returns the report. On error the
// report holds what was measured so far (nil if nothing was), and every
// table the benchmark created has been dropped.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	dsn := opts.DSN
	if dsn == "" {
		dir, err := os.MkdirTemp("", "seqbox-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: temporary directory for SQLite: %w", err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		dsn = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	db, err := opts.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: open %s: %w", dsnutil.Redact(dsn), err)
	}
	defer func() { _ = db.Close() }()

	b := newBencher(db, opts)
	echo := opts
	echo.DSN = dsnutil.Redact(opts.DSN)
	rep := &Report{
		Machine: machineInfo(), Options: echo, StartedAt: started.UTC(),
		TableRows: map[string]int64{},
	}
	if rep.Database, err = databaseInfo(ctx, db); err != nil {
		return nil, err
	}
	if rep.Knobs, err = b.knobs(ctx); err != nil {
		return nil, err
	}
	finish := func(err error) (*Report, error) {
		b.progress.close()
		rep.PeakRSSBytes = peakRSS()
		rep.Duration = time.Since(started)
		return rep, err
	}
	opts.Logger.Info("bench starting", slog.String("database", rep.Database.Name),
		slog.String("version", rep.Database.Version), slog.Any("scenarios", opts.Scenarios))

	// A baseline goes with the enqueue scenarios asked for, or with both
	// when it is asked for alone.
	enqueueAsked := opts.has(ScenarioEnqueueBatch) || opts.has(ScenarioEnqueueSingle)
	for _, sc := range []struct {
		name      string
		batch     int
		producers []int
	}{
		{ScenarioEnqueueBatch, opts.Batch, opts.producers(1, 4)},
		{ScenarioEnqueueSingle, 1, opts.producers(1, 8)},
	} {
		withBaseline := opts.has(ScenarioBaseline) && (opts.has(sc.name) || !enqueueAsked)
		if !opts.has(sc.name) && !withBaseline {
			continue
		}
		for _, p := range sc.producers {
			res, err := b.enqueueFigure(ctx, sc.name, opts.has(sc.name), withBaseline, p, sc.batch)
			rep.Results = append(rep.Results, res...)
			if err != nil {
				return finish(err)
			}
		}
	}
	if opts.has(ScenarioDrain) {
		res, err := b.drainFigure(ctx, rep.TableRows)
		if err != nil {
			return finish(err)
		}
		rep.Results = append(rep.Results, res)
	}
	if opts.has(ScenarioSustained) {
		res, err := b.sustainedFigure(ctx, opts.producers(4)[0], rep.TableRows)
		if err != nil {
			return finish(err)
		}
		rep.Results = append(rep.Results, res)
	}
	if opts.has(ScenarioLatency) {
		res, err := b.latencyFigure(ctx, opts.producers(4)[0])
		if err != nil {
			return finish(err)
		}
		rep.Results = append(rep.Results, res)
	}
	opts.Logger.Info("bench done", slog.Duration("took", time.Since(started)))
	return finish(nil)
}
