// Package bench is the measuring instrument behind `seqbox bench`: it runs
// seqbox's enqueue, drain, sustained-load and latency scenarios against one
// database, each on fresh tables, repeats every figure and reports the
// median with its min–max, next to a plain-INSERT baseline on the same
// database and the machine, database settings and seqbox knobs that decide
// the answer.
//
// The growth scenarios (held-snapshot, partitions, soak, and drain with
// several sizes) ask whether cost stays flat: each measures two conditions
// in one invocation and reports their ratio, because absolute figures move
// by 15% or more between sessions on a shared host while a ratio measured
// in one window does not. The capacity scenario raises a paced offered
// load until the pipeline falls behind: the pipeline's capacity, where the
// sustained scenario reports its producers' rate.
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

	"github.com/seqbox/seqbox"
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
	// Growth scenarios: how cost grows with a held snapshot, with the
	// partition count and with time.
	ScenarioHeldSnapshot = "held-snapshot"
	ScenarioPartitions   = "partitions"
	ScenarioSoak         = "soak"
	// ScenarioCapacity raises the offered load until the pipeline no
	// longer keeps up: the highest delivered rate with a bounded backlog,
	// beside the one-table INSERT ceiling.
	ScenarioCapacity = "capacity"
	// ScenarioSchema is a schema A/B of the enqueue write path: one
	// table, one ordered table, seqbox's two rows, as plain SQL.
	ScenarioSchema = "schema"
)

// AllScenarios lists every scenario in the order Run measures them.
func AllScenarios() []string {
	return append(DefaultScenarios(), ScenarioHeldSnapshot, ScenarioPartitions, ScenarioSoak, ScenarioCapacity, ScenarioSchema)
}

// DefaultScenarios are those run when none are named: the growth scenarios
// take minutes each at their defaults, so they run only when asked for.
func DefaultScenarios() []string {
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
	// CapacityStartDefault is the capacity scenario's first offered rate.
	CapacityStartDefault = 4000
	HeldWindowDefault    = time.Minute
	SoakDurationDefault  = 10 * time.Minute
	SoakIntervalDefault  = 10 * time.Second
	// SoakRateShareDefault: without SoakRate the soak offers this share of
	// the sustained rate it measures first, so a flat cost keeps the
	// backlog flat and a growing one shows as a growing backlog.
	SoakRateShareDefault = 0.8
)

// PartitionSweepDefault is the partition counts the partitions scenario compares.
func PartitionSweepDefault() []int { return []int{16, 1024} }

// PostgreSQL autovacuum modes of Options.PGAutovacuum.
const (
	AutovacuumLeave = "leave" // the server's setting as it is
	AutovacuumOn    = "on"
	AutovacuumOff   = "off"
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
	// Scenarios is a subset of AllScenarios; empty means DefaultScenarios. "baseline"
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
	// DrainMessages is the backlog the drain scenario preloads, one figure
	// per size; with several sizes each run drains every size in turn and
	// the report gives the ratio of each rate to the first size's.
	// Defaults to [200000].
	DrainMessages []int `json:"drain_messages"`
	// LatencyRate is the latency scenario's offered rate in msgs/s. Defaults to 1000.
	LatencyRate int `json:"latency_rate"`
	// CapacityStart is the capacity scenario's first offered rate in
	// msgs/s; each step offers 25% more. Defaults to 4000.
	CapacityStart int `json:"capacity_start,omitempty"`
	// HeldWindow is each of held-snapshot's two windows (plain, then with
	// a snapshot held). Defaults to 1m.
	HeldWindow time.Duration `json:"held_window_ns"`
	// HeldRate paces held-snapshot's producers to this many msgs/s in both
	// windows; 0 lets them run at full rate. Below the pipeline's capacity
	// the plain window's latency is the pipeline's, not a queue's, so the
	// held/plain p99 says what the held snapshot alone costs.
	HeldRate int `json:"held_rate,omitempty"`
	// PartitionSweep are the partition counts the partitions scenario
	// measures (sustained and latency for each, Duration per window); the
	// ratios are to the first. Defaults to [16, 1024].
	PartitionSweep []int `json:"partition_sweep"`
	// SoakDuration is the soak's window. Defaults to 10m.
	SoakDuration time.Duration `json:"soak_duration_ns"`
	// SoakInterval is how often the soak samples. Defaults to 10s.
	SoakInterval time.Duration `json:"soak_interval_ns"`
	// SoakRate is the soak's offered msgs/s; 0 measures a sustained window
	// (Duration) first and offers SoakRateShareDefault of its rate.
	SoakRate int `json:"soak_rate,omitempty"`
	// PGAutovacuum sets PostgreSQL's autovacuum for the run (ALTER SYSTEM
	// and a reload; the previous setting is restored afterwards, on error
	// and interrupt too): AutovacuumOn, AutovacuumOff, or AutovacuumLeave
	// (the default). Other databases ignore it.
	PGAutovacuum string `json:"pg_autovacuum"`
	// Knob overrides; 0 keeps the library default. They let one window
	// compare settings (A/B) with the same harness.
	SequencerWorkers     int `json:"sequencer_workers,omitempty"`
	SequencerBatch       int `json:"sequencer_batch,omitempty"`
	ProcessorConcurrency int `json:"processor_concurrency,omitempty"`
	ProcessorBatch       int `json:"processor_batch,omitempty"`
	// RotateInterval overrides Builder.RotateInterval (0 keeps the
	// default, negative is never): rotated tables on PostgreSQL.
	RotateInterval time.Duration `json:"rotate_interval_ns,omitempty"`
	// RotateSize overrides Builder.RotateSize (0 keeps the default,
	// negative is never by size).
	RotateSize int64 `json:"rotate_size,omitempty"`
	// Progress receives a live progress line redrawn with "\r"; nil for none.
	Progress io.Writer `json:"-"`
	// Logger receives the outbox's and the benchmark's log; nil discards it.
	Logger *slog.Logger `json:"-"`
}

func (o Options) withDefaults() Options {
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios()
	}
	o.Duration = cmp.Or(o.Duration, DurationDefault)
	o.Partitions = cmp.Or(o.Partitions, PartitionsDefault)
	o.Payload = cmp.Or(o.Payload, PayloadDefault)
	o.Batch = cmp.Or(o.Batch, BatchDefault)
	o.Runs = cmp.Or(o.Runs, RunsDefault)
	if len(o.DrainMessages) == 0 {
		o.DrainMessages = []int{DrainMessagesDefault}
	}
	o.LatencyRate = cmp.Or(o.LatencyRate, LatencyRateDefault)
	o.CapacityStart = cmp.Or(o.CapacityStart, CapacityStartDefault)
	o.HeldWindow = cmp.Or(o.HeldWindow, HeldWindowDefault)
	if len(o.PartitionSweep) == 0 {
		o.PartitionSweep = PartitionSweepDefault()
	}
	o.SoakDuration = cmp.Or(o.SoakDuration, SoakDurationDefault)
	o.SoakInterval = cmp.Or(o.SoakInterval, SoakIntervalDefault)
	o.PGAutovacuum = cmp.Or(o.PGAutovacuum, AutovacuumLeave)
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
	case o.Payload < 0 || o.Payload > seqbox.MaxPayloadBytesDefault:
		return bad("payload %d: must be 1..%d bytes", o.Payload, seqbox.MaxPayloadBytesDefault)
	case o.SequencerWorkers < 0 || o.SequencerBatch < 0 || o.ProcessorConcurrency < 0 || o.ProcessorBatch < 0:
		return bad("knob overrides must be >= 0 (0 keeps the default)")
	case o.Producers < 0 || o.Producers > 1000:
		return bad("producers %d: must be 0 (scenario default) or 1..1000", o.Producers)
	case o.Batch < 1 || o.Batch > 100000:
		return bad("batch %d: must be 1..100000", o.Batch)
	case o.Runs < 1 || o.Runs > 1000:
		return bad("runs %d: must be 1..1000", o.Runs)
	case slices.ContainsFunc(o.DrainMessages, func(n int) bool { return n < 1 }):
		return bad("drain messages %v: each must be >= 1", o.DrainMessages)
	case o.LatencyRate < 1:
		return bad("latency rate %d: must be >= 1 msg/s", o.LatencyRate)
	case o.CapacityStart < 1:
		return bad("capacity start %d: must be >= 1 msg/s", o.CapacityStart)
	case o.HeldWindow < 0 || o.SoakDuration < 0:
		return bad("held window %v, soak duration %v: must be > 0", o.HeldWindow, o.SoakDuration)
	case o.SoakInterval < 0 || o.SoakInterval > o.SoakDuration:
		return bad("soak interval %v: must be > 0 and at most the soak duration %v", o.SoakInterval, o.SoakDuration)
	case o.HeldRate < 0:
		return bad("held rate %d: must be >= 0 (0: full rate)", o.HeldRate)
	case o.SoakRate < 0:
		return bad("soak rate %d: must be >= 0 (0: %.0f%% of a sustained run)", o.SoakRate, 100*SoakRateShareDefault)
	case !slices.Contains([]string{AutovacuumLeave, AutovacuumOn, AutovacuumOff}, o.PGAutovacuum):
		return bad("pg autovacuum %q: want %s, %s or %s", o.PGAutovacuum, AutovacuumLeave, AutovacuumOn, AutovacuumOff)
	}
	for _, n := range o.PartitionSweep {
		if n < outbox.MinPartitions || n > outbox.MaxPartitions {
			return bad("partition sweep %v: each must be %d..%d", o.PartitionSweep, outbox.MinPartitions, outbox.MaxPartitions)
		}
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
	// drain.done (after the drain scenario; drain.<size>.done with several
	// sizes), each from its last run.
	TableRows map[string]int64 `json:"table_rows,omitempty"`
	// Autovacuum is PostgreSQL's autovacuum before, during and after the
	// run (nil elsewhere): dead rows pile up without it, so every figure
	// on PostgreSQL depends on it.
	Autovacuum *Autovacuum `json:"pg_autovacuum,omitempty"`
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
	RotateInterval              string `json:"rotate_interval"`
	RotateSize                  string `json:"rotate_size"`
}

// Autovacuum records PostgreSQL's autovacuum setting around a run.
type Autovacuum struct {
	// Mode is what Options.PGAutovacuum asked for: leave, on or off.
	Mode string `json:"mode"`
	// Before is the server's setting when the run began, During the one in
	// force while it measured, Restored the setting after the run put the
	// previous one back ("" when Mode is leave).
	Before   string `json:"before"`
	During   string `json:"during"`
	Restored string `json:"restored,omitempty"`
	// RestoreError is why the previous setting could not be put back.
	RestoreError string `json:"restore_error,omitempty"`
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
	Latency *LatencyStat `json:"latency,omitempty"`
	// Ratios compare this figure with another measured in the same
	// invocation (held/plain, 1024/16 partitions, last/first minute): one
	// value per run, each from a pair measured in that run.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Ladders are the capacity scenario's steps, one ladder per run.
	Ladders [][]CapacityStep `json:"ladders,omitempty"`
	// Samples are the soak's periodic readings, in time order.
	Samples []Sample       `json:"samples,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
}

// Ratio is one named comparison, over runs.
type Ratio struct {
	// Name says what is divided by what, e.g. "msgs/s held/plain".
	Name string `json:"name"`
	Stat
}

// Sample is one soak reading. Sizes are taken at the moment of the
// sample; rates cover the interval since the previous sample.
type Sample struct {
	AtSec           float64 `json:"at_s"`
	DeliveredPerSec float64 `json:"delivered_per_sec"`
	CommittedPerSec float64 `json:"committed_per_sec"`
	// LatencyP50Ms and LatencyP99Ms are of the deliveries in the interval.
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	// Incoming is unsequenced messages, Unprocessed sequenced and not
	// acked, WaitingVacuum acked outgoing rows not yet pruned (seq at or
	// below the cursor), counted in the first and last samples and once a
	// minute between (nil in the others: waitingVacuumEvery).
	Incoming      int64  `json:"incoming"`
	Unprocessed   int64  `json:"unprocessed"`
	WaitingVacuum *int64 `json:"waiting_vacuum,omitempty"`
	// TableRows are row counts by table (without prefix): the database's
	// estimates on PostgreSQL (n_live_tup) and MySQL/MariaDB (table_rows),
	// exact on SQLite. An exact COUNT(*) of a million-row table in every
	// sample is a full scan on the two cores being measured, and pushes
	// the pipeline's pages out of the buffer pool.
	TableRows map[string]int64 `json:"table_rows"`
	// Storage is what the database reports about the tables.
	Storage Storage `json:"storage"`
	// LogErrors and LogWarnings count seqbox's log records at those
	// levels since the run began.
	LogErrors   int64 `json:"log_errors"`
	LogWarnings int64 `json:"log_warnings"`
	// Memory of this process: Go heap live after the last GC, resident
	// set, goroutines. With the harness's latency store bounded, growth
	// here is the library's (or the embedded SQLite's).
	HeapLiveBytes int64 `json:"heap_live_bytes"`
	RSSBytes      int64 `json:"rss_bytes"`
	Goroutines    int   `json:"goroutines"`
	// TrackedInFlight is how many committed messages the harness holds for
	// their latency (about 50 bytes each): the part of the heap that
	// follows the backlog and is not the library's.
	TrackedInFlight int64 `json:"tracked_in_flight"`
}

// Storage is the database's own view of seqbox's tables, where it has one.
type Storage struct {
	// TableBytes by table (without prefix): PostgreSQL
	// pg_total_relation_size (heap, indexes, TOAST); MySQL/MariaDB
	// data_length + index_length (InnoDB's estimate, refreshed with its
	// statistics).
	TableBytes map[string]int64 `json:"table_bytes,omitempty"`
	// DeadTuples by table (PostgreSQL n_dead_tup): deleted rows no vacuum
	// has removed yet.
	DeadTuples map[string]int64 `json:"dead_tuples,omitempty"`
	// LiveRows by table: PostgreSQL n_live_tup, MySQL/MariaDB table_rows;
	// estimates the database keeps without reading the table.
	LiveRows map[string]int64 `json:"live_rows,omitempty"`
	// HistoryLength is InnoDB's purge backlog (undo logs not yet purged):
	// what a held read view makes grow on MySQL/MariaDB.
	HistoryLength int64 `json:"history_length,omitempty"`
	// FileBytes and WALBytes are SQLite's database and WAL files: a held
	// read transaction stops checkpoints, so the WAL grows.
	FileBytes int64 `json:"file_bytes,omitempty"`
	WALBytes  int64 `json:"wal_bytes,omitempty"`
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
	if rep.Database.Name == "postgres" {
		av, restore, err := setAutovacuum(ctx, db, opts.PGAutovacuum)
		if err != nil {
			return nil, err
		}
		rep.Autovacuum = av
		rep.Database.Settings["autovacuum"] = av.During
		defer restore() // after an error or an interrupt too: it has its own context
	}
	finish := func(err error) (*Report, error) {
		b.progress.close()
		if err != nil {
			err = b.logs.explain(err)
		}
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
		rep.Results = append(rep.Results, res...)
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
	for _, growth := range []struct {
		name    string
		measure func(ctx context.Context, producers int) ([]Result, error)
	}{
		{ScenarioHeldSnapshot, b.heldSnapshotFigure},
		{ScenarioPartitions, b.partitionSweepFigure},
		{ScenarioSoak, b.soakFigure},
		{ScenarioCapacity, b.capacityFigure},
		{ScenarioSchema, b.schemaFigure},
	} {
		if !opts.has(growth.name) {
			continue
		}
		res, err := growth.measure(ctx, opts.producers(4)[0])
		rep.Results = append(rep.Results, res...)
		if err != nil {
			return finish(err)
		}
	}
	opts.Logger.Info("bench done", slog.Duration("took", time.Since(started)))
	return finish(nil)
}
