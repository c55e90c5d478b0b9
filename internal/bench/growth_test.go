package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bundialect "github.com/uptrace/bun/dialect"

	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
)

// TestHistogramPercentiles: the bounded histogram gives the same
// nearest-rank percentiles as sorting every sample, within 1%, over the
// range latencies take (100 ns to minutes), and its max is exact.
func TestHistogramPercentiles(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	for name, gen := range map[string]func() int64{
		"log-uniform 100ns-100s": func() int64 { return int64(math.Exp(math.Log(100) + rng.Float64()*math.Log(1e9))) },
		"normal around 5ms":      func() int64 { return max(int64(5e6+rng.NormFloat64()*1e6), 0) },
		"small exact values":     func() int64 { return rng.Int64N(300) },
		"bimodal 1ms and 2s":     func() int64 { return []int64{1e6, 2e9}[rng.IntN(2)] + rng.Int64N(1e5) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHistogram()
			samples := make([]int64, 100000)
			for i := range samples {
				samples[i] = gen()
				h.record(samples[i])
			}
			slices.Sort(samples)
			for _, p := range []float64{1, 50, 90, 95, 99, 99.9} {
				want, got := percentile(samples, p), h.percentile(p)
				assert.InDelta(t, float64(want), float64(got), math.Max(float64(want)*0.01, 1), "p%v", p)
			}
			assert.Equal(t, samples[len(samples)-1], h.percentile(100), "max is exact")
			assert.Equal(t, int64(len(samples)), h.count())
		})
	}
	assert.Zero(t, newHistogram().percentile(50))
}

// TestHistogramBounded: recording allocates nothing, whatever the count,
// and every value maps into the fixed array, huge ones included.
func TestHistogramBounded(t *testing.T) {
	h := newHistogram()
	v := int64(1)
	allocs := testing.AllocsPerRun(10000, func() {
		h.record(v)
		v = v*3 + 1
		if v < 0 {
			v = 1
		}
	})
	assert.Zero(t, allocs)
	h.record(math.MaxInt64)
	assert.Equal(t, int64(math.MaxInt64), h.percentile(100))
	for _, v := range []int64{0, 255, 256, 257, 511, 512, 1 << 30, histMaxValue} {
		lo, hi := histBounds(histBucket(v))
		assert.True(t, lo <= v && v <= hi, "%d in [%d, %d]", v, lo, hi)
		assert.LessOrEqual(t, float64(hi-lo), float64(v)/128+1, "bucket of %d narrower than 1/128", v)
	}
	assert.Equal(t, histBuckets-1, histBucket(histMaxValue))

	a, b := newHistogram(), newHistogram()
	a.record(10)
	b.record(1000)
	m := merged([]*histogram{a, b, newHistogram()})
	assert.Equal(t, int64(2), m.count())
	assert.Equal(t, int64(10), m.percentile(50))
	assert.Equal(t, int64(1000), m.percentile(100))
}

// TestTrackerMemoryFlat: a tracker keeps only messages in flight, so a
// long run does not grow the harness's heap.
func TestTrackerMemoryFlat(t *testing.T) {
	tr := newTracker()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	run := func(n int) {
		ids := make([]outbox.MessageID, 100)
		for range n / len(ids) {
			for i := range ids {
				_, _ = rand.Read(ids[i][:])
			}
			tr.committed(ids)
			for _, id := range ids {
				tr.delivered(id)
			}
		}
	}
	run(100000)
	before := heap()
	run(1000000)
	after := heap()
	assert.Less(t, int64(after)-int64(before), int64(1<<20), "1M more deliveries, heap %d -> %d", before, after)
	lat, _ := tr.result()
	assert.Equal(t, int64(1100000), lat.Samples)
}

// TestCountingHandler: warnings and errors are counted whatever the
// wrapped handler prints, per message, with the last error kept.
func TestCountingHandler(t *testing.T) {
	var out bytes.Buffer
	counts := &logCounts{}
	log := slog.New(newCountingHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}), counts))
	before := counts.snapshot()
	log.Info("fine")
	log.Warn("slow", "ms", 10)
	log.With("component", "processor").Error("process partition failed", "error", "deadlock detected")
	log.Error("process partition failed", "error", "lock timeout")
	extra := map[string]any{}
	counts.since(before, extra)
	assert.Equal(t, int64(2), extra["log_errors"])
	assert.Equal(t, int64(1), extra["log_warnings"])
	assert.Equal(t, map[string]int64{"WARN slow": 1, "ERROR process partition failed": 2}, extra["log_messages"])
	assert.Equal(t, "lock timeout", extra["log_last_error"])
	assert.Equal(t, 2, strings.Count(out.String(), "level=ERROR"), "the inner handler still filters")
	assert.NotContains(t, out.String(), "slow")
}

// TestEdgeSamples: a soak compares minutes, or halves when shorter.
func TestEdgeSamples(t *testing.T) {
	assert.Equal(t, 6, edgeSamples(10*time.Minute, 10*time.Second))
	assert.Equal(t, 2, edgeSamples(2*time.Second, 500*time.Millisecond))
	assert.Equal(t, 1, edgeSamples(time.Second, time.Second))
	s := []Sample{{AtSec: 1, DeliveredPerSec: 100}, {AtSec: 3, DeliveredPerSec: 10}}
	assert.InDelta(t, 40.0, edgeRate(s, 0, 2), 1e-9, "weighted by interval: (100*1 + 10*2) / 3")
}

// growthDatabases are the three databases the growth scenarios run on.
func growthDatabases() []struct {
	name  string
	setup func(t *testing.T) Options
} {
	return []struct {
		name  string
		setup func(t *testing.T) Options
	}{
		{"postgres", func(t *testing.T) Options {
			dbtest.Postgres(t) // skips, or fails under CI, when unreachable
			return Options{DSN: dbtest.PostgresDSN(), Open: openPostgres}
		}},
		{"mysql", func(t *testing.T) Options {
			dbtest.MySQL(t)
			return Options{DSN: dbtest.MySQLDSN(), Open: openMySQL}
		}},
		{"sqlite", func(t *testing.T) Options {
			return Options{DSN: "sqlite:" + t.TempDir() + "/bench.db", Open: openSQLite}
		}},
	}
}

// tiny shrinks every size so that a scenario takes a few seconds.
func tiny(o Options, scenario string) Options {
	o.Scenarios = []string{scenario}
	o.Runs, o.Duration, o.Partitions, o.Producers, o.Batch = 1, 500*time.Millisecond, 4, 2, 20
	o.LatencyRate = 100
	return o
}

// roundTrip checks the report survives JSON and prints the same either way.
func roundTrip(t *testing.T, rep *Report) string {
	t.Helper()
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	var fromJSON bytes.Buffer
	require.NoError(t, back.WriteText(&fromJSON))
	assert.Equal(t, text.String(), fromJSON.String(), "a report read back from JSON prints the same")
	return text.String()
}

func byScenario(rep *Report, scenario string) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Scenario == scenario {
			out = append(out, r)
		}
	}
	return out
}

func ratioNames(r Result) []string {
	var names []string
	for _, ratio := range r.Ratios {
		names = append(names, ratio.Name)
	}
	return names
}

// TestGrowthScenarios runs held-snapshot, the partition sweep, the soak,
// the capacity ladder and a two-size drain briefly on each database and checks that every
// report has its figures and ratios (not their values: timing is the
// machine's business).
func TestGrowthScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every growth scenario for a few seconds on each database")
	}
	for _, db := range growthDatabases() {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			base := db.setup(t)
			t.Run(ScenarioHeldSnapshot, func(t *testing.T) { testHeldSnapshot(t, db.name, base) })
			t.Run(ScenarioDrain, func(t *testing.T) { testDrainSizes(t, base) })
			t.Run(ScenarioPartitions, func(t *testing.T) { testPartitionSweep(t, base) })
			t.Run(ScenarioSoak, func(t *testing.T) { testSoak(t, db.name, base) })
			t.Run(ScenarioCapacity, func(t *testing.T) { testCapacity(t, base) })
			t.Run(ScenarioSchema, func(t *testing.T) { testSchema(t, base) })
		})
	}
}

func runTiny(t *testing.T, o Options) (*Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	require.NoError(t, err)
	text := roundTrip(t, rep)
	t.Log("\n" + text)
	return rep, text
}

func testHeldSnapshot(t *testing.T, dbName string, base Options) {
	o := tiny(base, ScenarioHeldSnapshot)
	o.HeldWindow = time.Second
	if dbName == "sqlite" {
		// Paced here, at full rate on the servers: both paths run.
		o.HeldRate = 200
	}
	if dbName == "postgres" {
		// Set autovacuum to the value it has already: the whole path (ALTER
		// SYSTEM, reload, restore) runs without changing what other tests
		// on this server see.
		db, err := openPostgres(context.Background(), o.DSN)
		require.NoError(t, err)
		now, err := showAutovacuum(context.Background(), db)
		_ = db.Close()
		require.NoError(t, err)
		o.PGAutovacuum = now
	}
	rep, text := runTiny(t, o)
	res := byScenario(rep, ScenarioHeldSnapshot)
	require.Len(t, res, 2)
	assert.True(t, strings.HasPrefix(res[0].Variant, "plain, "), res[0].Variant)
	assert.True(t, strings.HasPrefix(res[1].Variant, "snapshot held, "), res[1].Variant)
	for _, r := range res {
		assert.GreaterOrEqual(t, r.MsgsPerSec.Median, 0.0, r.Variant) // a 1 s window on a loaded host may deliver nothing
		if assert.NotNil(t, r.Latency, r.Variant) {
			assert.GreaterOrEqual(t, r.Latency.Samples, int64(0))
		}
		for _, key := range []string{"backlog_final", "backlog_growth", "backlog_growth_per_sec", "backlog_max", "storage_at_window_end", "log_errors", "log_warnings"} {
			assert.Contains(t, r.Extra, key, r.Variant)
		}
		end := r.Extra["storage_at_window_end"].([]map[string]int64)
		require.Len(t, end, 1)
		switch dbName {
		case "postgres":
			assert.Contains(t, end[0], "dead_tuples")
			assert.Contains(t, end[0], "table_bytes")
		case "mysql":
			assert.Contains(t, end[0], "table_bytes")
		case "sqlite":
			assert.Contains(t, end[0], "file_bytes")
		}
	}
	if o.HeldRate > 0 {
		// 2 producers x 20 messages, one transaction each per 200 ms, the
		// first a pace after the start: at most 200 in a 1 s window (240
		// allows one more tick each). Unpaced, SQLite commits thousands.
		for _, r := range res {
			assert.True(t, strings.HasPrefix(r.Variant, "plain, 200 msgs/s offered, ") || strings.HasPrefix(r.Variant, "snapshot held, 200 msgs/s offered, "), r.Variant)
			assert.LessOrEqual(t, r.Latency.Samples, int64(240), r.Variant)
		}
		assert.Contains(t, text, "held-snapshot windows 1s at 200 msgs/s")
	}
	assert.Empty(t, res[0].Ratios)
	assert.Equal(t, []string{"delivered msgs/s held/plain", "latency p50 held/plain", "latency p99 held/plain"}, ratioNames(res[1]))
	for _, ratio := range res[1].Ratios {
		// A ratio whose divisor is 0 (a 1 s plain window that delivered
		// nothing on a loaded host) has no run, and says so.
		assert.LessOrEqual(t, len(ratio.Runs), 1, ratio.Name)
	}
	if res[0].MsgsPerSec.Median > 0 {
		assert.Len(t, res[1].Ratios[0].Runs, 1)
	} else {
		assert.Empty(t, res[1].Ratios[0].Runs)
		assert.Contains(t, text, "n/a (its divisor was 0 in every run)")
	}
	assert.GreaterOrEqual(t, res[1].Ratios[0].Median, 0.0)
	held, _ := res[1].Extra["held"].(string)
	assert.Contains(t, held, "open for the whole window")
	assert.Contains(t, text, "ratios (")
	assert.Contains(t, text, "held/plain")

	if dbName == "postgres" {
		require.NotNil(t, rep.Autovacuum)
		av := rep.Autovacuum
		assert.Equal(t, o.PGAutovacuum, av.Mode)
		assert.Equal(t, av.Before, av.During)
		assert.Equal(t, av.Before, av.Restored)
		assert.Empty(t, av.RestoreError)
		assert.Equal(t, av.During, rep.Database.Settings["autovacuum"])
		assert.Contains(t, text, "autovacuum: "+av.During+" for this run")
	} else {
		assert.Nil(t, rep.Autovacuum)
	}
	assertNoTablesLeft(t, o)
}

func testDrainSizes(t *testing.T, base Options) {
	o := tiny(base, ScenarioDrain)
	o.DrainMessages = []int{300, 900}
	rep, _ := runTiny(t, o)
	res := byScenario(rep, ScenarioDrain)
	require.Len(t, res, 2)
	assert.Equal(t, "300 msgs, 4 partitions", res[0].Variant)
	assert.Equal(t, "900 msgs, 4 partitions", res[1].Variant)
	for _, r := range res {
		assert.Positive(t, r.MsgsPerSec.Median)
		assert.Contains(t, r.Extra, "us_per_msg")
	}
	assert.Empty(t, res[0].Ratios)
	assert.Equal(t, []string{"msgs/s 900/300 msgs"}, ratioNames(res[1]))
	assert.Positive(t, res[1].Ratios[0].Median)
	assert.Contains(t, rep.TableRows, "drain.300.done.body")
	assert.Contains(t, rep.TableRows, "drain.900.done.body")
}

func testPartitionSweep(t *testing.T, base Options) {
	o := tiny(base, ScenarioPartitions)
	o.PartitionSweep = []int{2, 8}
	rep, text := runTiny(t, o)
	res := byScenario(rep, ScenarioPartitions)
	require.Len(t, res, 4)
	assert.Equal(t, "2 partitions, sustained 20/tx, 2 producers", res[0].Variant)
	assert.Equal(t, "2 partitions, latency 100 msgs/s offered, 1/tx, 2 producers", res[1].Variant)
	assert.Equal(t, "8 partitions, sustained 20/tx, 2 producers", res[2].Variant)
	// Half-second windows on a loaded 2-core host under -race may deliver
	// nothing: the fields must be there, the figures are not judged here.
	for _, r := range res {
		assert.GreaterOrEqual(t, r.MsgsPerSec.Median, 0.0, r.Variant)
		assert.NotNil(t, r.Latency, r.Variant)
	}
	assert.Empty(t, res[0].Ratios)
	assert.Empty(t, res[1].Ratios)
	assert.Equal(t, []string{"sustained msgs/s 8/2 partitions", "sustained latency p99 8/2 partitions"}, ratioNames(res[2]))
	assert.Equal(t, []string{"latency p50 8/2 partitions", "latency p99 8/2 partitions"}, ratioNames(res[3]))
	assert.Contains(t, text, "8/2 partitions")
}

func testSoak(t *testing.T, dbName string, base Options) {
	o := tiny(base, ScenarioSoak)
	o.SoakDuration, o.SoakInterval, o.SoakRate = 2*time.Second, 500*time.Millisecond, 400
	if dbName == "sqlite" {
		o.SoakRate = 0 // measure the rate first, once
	}
	rep, text := runTiny(t, o)
	res := byScenario(rep, ScenarioSoak)
	require.Len(t, res, 1)
	r := res[0]
	assert.GreaterOrEqual(t, r.MsgsPerSec.Median, 0.0)
	// Every 0.5 s for 2 s; a loaded machine may skip a tick while a sample
	// is being read.
	require.GreaterOrEqual(t, len(r.Samples), 2)
	for i, s := range r.Samples {
		assert.Positive(t, s.AtSec, "sample %d", i)
		if i > 0 {
			assert.Greater(t, s.AtSec, r.Samples[i-1].AtSec)
		}
		// Counted in the first sample, then once a minute: not again
		// before the last one (waitingVacuumEvery).
		if i == 0 {
			assert.NotNil(t, s.WaitingVacuum, "the first sample counts the rows waiting for the vacuum")
		} else if i < len(r.Samples)-1 {
			assert.Nil(t, s.WaitingVacuum, "sample %d: counted once a minute", i)
		}
		for _, table := range []string{"body", "incoming", "outgoing", "processor"} {
			assert.Contains(t, s.TableRows, table, "sample %d", i)
		}
		assert.Positive(t, s.HeapLiveBytes, "sample %d", i)
		assert.Positive(t, s.Goroutines, "sample %d", i)
		assert.GreaterOrEqual(t, s.TrackedInFlight, int64(0), "sample %d", i)
		if runtime.GOOS == "linux" {
			assert.Positive(t, s.RSSBytes, "sample %d", i)
		}
		switch dbName {
		case "postgres":
			assert.Contains(t, s.Storage.TableBytes, "body")
			assert.Contains(t, s.Storage.DeadTuples, "outgoing")
		case "mysql":
			assert.Contains(t, s.Storage.TableBytes, "body")
		case "sqlite":
			assert.Positive(t, s.Storage.FileBytes)
		}
	}
	// The last/first ratio exists only when the first edge delivered
	// something, which a tiny run on a loaded host may not.
	if len(r.Samples) > 0 && r.Samples[0].DeliveredPerSec > 0 {
		assert.Contains(t, ratioNames(r), "delivered msgs/s last/first 1s")
	}
	for _, key := range []string{
		"offered_msgs_per_sec", "offered_rate_from", "first_edge_delivered_msgs_per_sec", "last_edge_delivered_msgs_per_sec",
		"max_incoming", "max_unprocessed", "max_waiting_vacuum", "max_table_rows", "max_heap_live_bytes", "max_rss_bytes",
		"log_errors", "log_warnings",
	} {
		assert.Contains(t, r.Extra, key)
	}
	if dbName == "postgres" {
		assert.Contains(t, r.Extra, "max_table_bytes")
		assert.Contains(t, r.Extra, "max_dead_tuples")
		assert.Contains(t, text, "dead tuples")
	}
	if dbName == "sqlite" {
		assert.Contains(t, r.Extra["offered_rate_from"], "of a 500ms sustained run")
	} else {
		assert.Equal(t, 400.0, r.Extra["offered_msgs_per_sec"])
	}
	assert.Contains(t, text, "samples (rates and latency over the interval")
	assert.Contains(t, text, "heap / rss")
}

// assertNoTablesLeft: every table the run made is gone, the held
// snapshot's unrelated one included.
func assertNoTablesLeft(t *testing.T, o Options) {
	t.Helper()
	ctx := context.Background()
	db, err := o.Open(ctx, o.DSN)
	require.NoError(t, err)
	defer db.Close()
	var n int
	var q string
	switch db.Dialect().Name() {
	case bundialect.SQLite:
		q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'bench%unrelated'"
	default:
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'bench%unrelated'"
	}
	require.NoError(t, db.NewRaw(q).Scan(ctx, &n))
	assert.Zero(t, n, "the held snapshot's table is dropped")
}

func TestSlope(t *testing.T) {
	assert.InDelta(t, 2.0, slope([]int64{1, 3, 5, 7}), 1e-9)
	assert.InDelta(t, 0.0, slope([]int64{4, 4, 4}), 1e-9)
	assert.Zero(t, slope([]int64{9}))
	assert.Zero(t, slope(nil))
}

func TestLogCountsExplain(t *testing.T) {
	counts := &logCounts{}
	base := errors.New("bench: handled 1 of 2 messages")
	assert.Equal(t, base, counts.explain(base), "nothing logged: the error as it was")
	log := slog.New(newCountingHandler(slog.DiscardHandler, counts))
	log.Error("process partition failed", "error", "prepare: syntax error")
	err := counts.explain(base)
	assert.ErrorIs(t, err, base)
	assert.Contains(t, err.Error(), "seqbox logged 1 errors; the last: prepare: syntax error")
}

// TestProduceSlowPaceEndsAtDeadline: a producer waiting for a step far
// beyond the window stops at the window's end (a soak at a low rate once
// ran a pace past its duration).
func TestProduceSlowPaceEndsAtDeadline(t *testing.T) {
	var committed atomic.Int64
	began := time.Now()
	elapsed, err := produce(context.Background(), 2, 100*time.Millisecond, time.Minute, &committed,
		func(context.Context, int) (int, error) { return 1, nil })
	require.NoError(t, err)
	assert.Less(t, time.Since(began), 10*time.Second)
	assert.Less(t, elapsed, 10*time.Second)
	assert.Zero(t, committed.Load(), "the first step is a pace away")
}

// TestPacerCatchesUp: a step slower than the pace delays the steps after
// it, which then start at once until the producer is on schedule again,
// so a window offers its whole rate. The clock is simulated: each step
// starts when the pacer says and takes the time it is given.
func TestPacerCatchesUp(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	ms := time.Millisecond
	p := pacer{next: start, pace: 4 * ms}
	now := start
	var starts []time.Duration
	for k := range 25 {
		now = now.Add(p.wait(now))
		starts = append(starts, now.Sub(start))
		took := 1 * ms
		if k == 0 {
			took = 10 * ms // a slow commit holds up the two steps due at 8 and 12 ms
		}
		now = now.Add(took)
	}
	assert.Equal(t, []time.Duration{4 * ms, 14 * ms, 15 * ms, 16 * ms, 20 * ms, 24 * ms}, starts[:6])
	assert.Equal(t, 100*ms, starts[24], "25 steps in the first 100 ms: the rate is kept")

	unpaced := pacer{next: start}
	assert.Zero(t, unpaced.wait(start.Add(time.Hour)), "without a pace every step is due at once")
}

func TestThroughput(t *testing.T) {
	p := pipelineRun{committed: 300, window: time.Second, drainAfter: 500 * time.Millisecond}
	assert.InDelta(t, 200.0, p.throughput(), 1e-9)
	assert.Zero(t, pipelineRun{}.throughput())
}

// testCapacity: a ladder whose first step offers more than the producers
// can commit ends there, marked producer-limited (its figure a lower
// bound), and the one-table ceiling is measured beside it; the text report lists
// the ladder. (Where a real ladder stops is the machine's business.)
func testCapacity(t *testing.T, base Options) {
	o := tiny(base, ScenarioCapacity)
	o.CapacityStart = 10_000_000
	rep, text := runTiny(t, o)
	res := byScenario(rep, ScenarioCapacity)
	require.Len(t, res, 1)
	r := res[0]
	require.Len(t, r.Ladders, 1)
	require.Len(t, r.Ladders[0], 1)
	assert.True(t, r.Ladders[0][0].ProducerLimited)
	if r.Ladders[0][0].KeptUp {
		assert.Equal(t, r.Ladders[0][0].Delivered, r.MsgsPerSec.Median, "the pipeline kept up with what was committed: a lower bound")
	} else {
		assert.Zero(t, r.MsgsPerSec.Median, "no step kept up")
	}
	require.NotNil(t, r.Baseline)
	assert.Positive(t, r.Baseline.Median)
	assert.Equal(t, []string{"capacity / one-table INSERT ceiling"}, ratioNames(r))
	assert.Contains(t, text, "capacity ladder, run 1")
	assert.Contains(t, text, "the producers could not offer this rate")
}

// testSchema: the schema A/B writes each shape three ways and reports the
// ordered table and the two rows against the one-table baseline of the
// same rounds, which it also lists.
func testSchema(t *testing.T, base Options) {
	rep, text := runTiny(t, tiny(base, ScenarioSchema))
	res := byScenario(rep, ScenarioSchema)
	require.Len(t, res, 6)
	for _, r := range res {
		assert.Positive(t, r.MsgsPerSec.Median, r.Variant)
		if strings.HasSuffix(r.Variant, "(the baseline)") {
			assert.Nil(t, r.Baseline, r.Variant)
			continue
		}
		require.NotNil(t, r.Baseline, r.Variant)
		assert.InDelta(t, r.MsgsPerSec.Median/r.Baseline.Median, r.Ratio, 1e-9, r.Variant)
	}
	assert.Contains(t, text, "one ordered table")
}
