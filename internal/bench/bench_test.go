package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/outbox"
)

// openSQLite opens "sqlite:path" the way the CLI does.
func openSQLite(_ context.Context, dsn string) (*bun.DB, error) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return nil, fmt.Errorf("test opener: want sqlite:path, got %q", dsn)
	}
	sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), path))
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	return bun.NewDB(sqldb, sqlitedialect.New()), nil
}

func TestRunEmbeddedSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario for a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{
		// A window long enough that the sustained run delivers something even
		// under -race on a loaded 2-core machine (its p50 was ~350 ms there; a
		// 1 s window delivered nothing once with a load average of 16).
		Open: openSQLite, Duration: 2 * time.Second, Runs: 1,
		DrainMessages: []int{2000}, LatencyRate: 200, Progress: &progress,
	})
	require.NoError(t, err)

	type key struct{ scenario, variant string }
	const twoRows = ", two rows (body + incoming, plain SQL)"
	got := map[key]Result{}
	for _, r := range rep.Results {
		got[key{r.Scenario, r.Variant}] = r
		assert.Greater(t, r.MsgsPerSec.Median, 0.0, "%s %s", r.Scenario, r.Variant)
		assert.Len(t, r.MsgsPerSec.Runs, 1, "%s %s", r.Scenario, r.Variant)
	}
	want := []key{
		{ScenarioEnqueueBatch, "100/tx, 1 producer"}, {ScenarioEnqueueBatch, "100/tx, 4 producers"},
		{ScenarioEnqueueSingle, "1/tx, 1 producer"}, {ScenarioEnqueueSingle, "1/tx, 8 producers"},
		{ScenarioEnqueueBatch, "100/tx, 1 producer, write path only"}, {ScenarioEnqueueBatch, "100/tx, 4 producers, write path only"},
		{ScenarioEnqueueSingle, "1/tx, 1 producer, write path only"}, {ScenarioEnqueueSingle, "1/tx, 8 producers, write path only"},
		{ScenarioEnqueueBatch, "100/tx, 1 producer, write path only, dedup keys"}, {ScenarioEnqueueBatch, "100/tx, 4 producers, write path only, dedup keys"},
		{ScenarioEnqueueSingle, "1/tx, 1 producer, write path only, dedup keys"}, {ScenarioEnqueueSingle, "1/tx, 8 producers, write path only, dedup keys"},
		{ScenarioDrain, "2000 msgs, 16 partitions"},
		{ScenarioSustained, "100/tx, 4 producers"},
		{ScenarioLatency, "200 msgs/s offered, 1/tx, 4 producers"},
		{ScenarioBaseline, "enqueue-batch: 100/tx, 1 producer"}, {ScenarioBaseline, "enqueue-batch: 100/tx, 4 producers"},
		{ScenarioBaseline, "enqueue-single: 1/tx, 1 producer"}, {ScenarioBaseline, "enqueue-single: 1/tx, 8 producers"},
		{ScenarioBaseline, "enqueue-batch: 100/tx, 1 producer" + twoRows}, {ScenarioBaseline, "enqueue-batch: 100/tx, 4 producers" + twoRows},
		{ScenarioBaseline, "enqueue-single: 1/tx, 1 producer" + twoRows}, {ScenarioBaseline, "enqueue-single: 1/tx, 8 producers" + twoRows},
	}
	for _, k := range want {
		r, ok := got[k]
		if !assert.True(t, ok, "missing result %v", k) {
			continue
		}
		switch k.scenario {
		case ScenarioEnqueueBatch, ScenarioEnqueueSingle:
			if assert.NotNil(t, r.Baseline, "%v", k) {
				assert.Greater(t, r.Baseline.Median, 0.0)
				assert.InDelta(t, r.MsgsPerSec.Median/r.Baseline.Median, r.Ratio, 1e-9)
			}
		case ScenarioSustained, ScenarioLatency:
			if assert.NotNil(t, r.Latency, "%v", k) {
				assert.Positive(t, r.Latency.Samples)
				assert.LessOrEqual(t, r.Latency.P50, r.Latency.P99)
				assert.LessOrEqual(t, r.Latency.P99, r.Latency.Max)
			}
			assert.Contains(t, r.Extra, "backlog_max")
		}
	}
	assert.Len(t, rep.Results, len(want))

	assert.Equal(t, "sqlite", rep.Database.Name)
	assert.NotEmpty(t, rep.Database.Version)
	assert.Contains(t, rep.Database.Settings["journal_mode"], "wal")
	assert.Contains(t, rep.Database.Settings, "synchronous")
	assert.Equal(t, 1, rep.Knobs.SequencerWorkers, "SQLite runs one sequencer worker")
	assert.Positive(t, rep.Machine.Cores)
	for _, moment := range []string{"sustained.end", "sustained.drained", "drain.done"} {
		assert.Contains(t, rep.TableRows, moment+".body")
		assert.Contains(t, rep.TableRows, moment+".incoming")
	}
	assert.Zero(t, rep.TableRows["sustained.drained.incoming"], "drained means nothing unsequenced")
	assert.Contains(t, progress.String(), "\r")

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	for _, s := range []string{"enqueue-batch", "baseline", "sustained", "latency", "journal_mode=wal", "table rows"} {
		assert.Contains(t, text.String(), s)
	}
	t.Log("\n" + text.String())

	var first bytes.Buffer
	require.NoError(t, rep.WriteJSON(&first))
	var back Report
	require.NoError(t, json.Unmarshal(first.Bytes(), &back))
	var second bytes.Buffer
	require.NoError(t, back.WriteJSON(&second))
	assert.JSONEq(t, first.String(), second.String())
	assert.Equal(t, rep.Results[0].MsgsPerSec, back.Results[0].MsgsPerSec)
	var fromJSON bytes.Buffer
	require.NoError(t, back.WriteText(&fromJSON))
	assert.Equal(t, text.String(), fromJSON.String(), "a report read back from JSON prints the same")
}

func TestRunSubsetAndNoTablesLeft(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite:" + dir + "/bench.db"
	rep, err := Run(ctx, Options{
		DSN: dsn, Open: openSQLite, Scenarios: []string{ScenarioEnqueueSingle}, Producers: 2,
		Duration: 100 * time.Millisecond, Runs: 2,
	})
	require.NoError(t, err)
	require.Len(t, rep.Results, 3, "no baseline asked for, one producer count: in-process, write-path-only, with dedup keys")
	require.Equal(t, "1/tx, 2 producers, write path only", rep.Results[1].Variant)
	require.Equal(t, "1/tx, 2 producers, write path only, dedup keys", rep.Results[2].Variant)
	r := rep.Results[0]
	assert.Equal(t, "1/tx, 2 producers", r.Variant)
	assert.Nil(t, r.Baseline)
	assert.Zero(t, r.Ratio)
	assert.Len(t, r.MsgsPerSec.Runs, 2)

	db, err := openSQLite(ctx, dsn)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'bench%'").Scan(ctx, &n))
	assert.Zero(t, n, "every run drops its tables")
}

func TestRunBaselineFollowsEnqueueScenarios(t *testing.T) {
	ctx := context.Background()
	rep, err := Run(ctx, Options{
		Open: openSQLite, Scenarios: []string{ScenarioEnqueueBatch, ScenarioBaseline}, Producers: 1,
		Duration: 100 * time.Millisecond, Runs: 1,
	})
	require.NoError(t, err)
	require.Len(t, rep.Results, 5)
	assert.Equal(t, ScenarioEnqueueBatch, rep.Results[0].Scenario)
	assert.NotNil(t, rep.Results[0].Baseline)
	assert.NotNil(t, rep.Results[1].Baseline, "the write-path-only figure has the same baseline")
	assert.NotNil(t, rep.Results[2].Baseline, "and the dedup-key figure")
	assert.Positive(t, rep.Results[2].Extra["vs_write_path"])
	assert.Equal(t, "enqueue-batch: 100/tx, 1 producer", rep.Results[3].Variant, "no enqueue-single baseline")
	// The two-row floor: seqbox's two tables written by plain SQL, its
	// ratio to the one-table baseline, and the write path's ratio to it.
	two := rep.Results[4]
	assert.Equal(t, "enqueue-batch: 100/tx, 1 producer, two rows (body + incoming, plain SQL)", two.Variant)
	if assert.NotNil(t, two.Baseline) {
		assert.InDelta(t, two.MsgsPerSec.Median/two.Baseline.Median, two.Ratio, 1e-9)
	}
	assert.Positive(t, rep.Results[1].Extra["vs_two_row_baseline"])

	rep, err = Run(ctx, Options{
		Open: openSQLite, Scenarios: []string{ScenarioBaseline}, Producers: 1, Duration: 100 * time.Millisecond, Runs: 1,
	})
	require.NoError(t, err)
	require.Len(t, rep.Results, 4, "baseline alone: both enqueue shapes, one table and two")
	for _, r := range rep.Results {
		assert.Equal(t, ScenarioBaseline, r.Scenario)
		assert.Positive(t, r.MsgsPerSec.Median)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Open: openSQLite}
	for name, mod := range map[string]func(*Options){
		"no opener":        func(o *Options) { o.Open = nil },
		"unknown scenario": func(o *Options) { o.Scenarios = []string{"enqueue"} },
		"partitions":       func(o *Options) { o.Partitions = outbox.MaxPartitions + 1 },
		"payload":          func(o *Options) { o.Payload = -1 },
		"batch":            func(o *Options) { o.Batch = -5 },
		"duration":         func(o *Options) { o.Duration = -time.Second },
		"producers":        func(o *Options) { o.Producers = -1 },
		"drain messages":   func(o *Options) { o.DrainMessages = []int{1000, 0} },
		"partition sweep":  func(o *Options) { o.PartitionSweep = []int{16, outbox.MaxPartitions + 1} },
		"held window":      func(o *Options) { o.HeldWindow = -time.Second },
		"soak interval":    func(o *Options) { o.SoakDuration, o.SoakInterval = time.Second, time.Minute },
		"held rate":        func(o *Options) { o.HeldRate = -1 },
		"soak rate":        func(o *Options) { o.SoakRate = -1 },
		"pg autovacuum":    func(o *Options) { o.PGAutovacuum = "auto" },
	} {
		t.Run(name, func(t *testing.T) {
			o := ok
			mod(&o)
			_, err := Run(context.Background(), o)
			assert.True(t, errors.Is(err, ErrInvalidOptions), "got %v", err)
		})
	}
	d := ok.withDefaults()
	assert.Equal(t, DefaultScenarios(), d.Scenarios, "the growth scenarios run only when named")
	assert.Subset(t, AllScenarios(), []string{ScenarioHeldSnapshot, ScenarioPartitions, ScenarioSoak})
	assert.Equal(t, DurationDefault, d.Duration)
	assert.Equal(t, []int{DrainMessagesDefault}, d.DrainMessages)
	assert.Equal(t, []int{16, 1024}, d.PartitionSweep)
	assert.Equal(t, time.Minute, d.HeldWindow)
	assert.Equal(t, 10*time.Minute, d.SoakDuration)
	assert.Equal(t, 10*time.Second, d.SoakInterval)
	assert.Equal(t, AutovacuumLeave, d.PGAutovacuum)
	assert.Equal(t, []int{1, 4}, d.producers(1, 4))
	d.Producers = 3
	assert.Equal(t, []int{3}, d.producers(1, 4))
}

func TestNewStat(t *testing.T) {
	s := newStat([]float64{30, 10, 20})
	assert.Equal(t, Stat{Median: 20, Min: 10, Max: 30, Runs: []float64{30, 10, 20}}, s, "odd count: the middle; runs keep their order")
	assert.Equal(t, 25.0, newStat([]float64{40, 10, 20, 30}).Median, "even count: mean of the middle two")
	assert.Equal(t, Stat{Median: 7, Min: 7, Max: 7, Runs: []float64{7}}, newStat([]float64{7}))
	assert.Equal(t, Stat{}, newStat(nil))
	assert.Zero(t, median(nil))
}

func TestPercentile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1) // 1..100
	}
	assert.Equal(t, int64(50), percentile(hundred, 50))
	assert.Equal(t, int64(95), percentile(hundred, 95))
	assert.Equal(t, int64(99), percentile(hundred, 99))
	assert.Equal(t, int64(100), percentile(hundred, 100))
	assert.Equal(t, int64(1), percentile(hundred, 0.1), "never below the first")
	assert.Equal(t, 5.0, percentile([]float64{5}, 99))
	assert.Zero(t, percentile([]int64(nil), 50))
	// Nearest rank, no interpolation: p50 of 1..4 is 2, p75 is 3.
	assert.Equal(t, int64(2), percentile([]int64{1, 2, 3, 4}, 50))
	assert.Equal(t, int64(3), percentile([]int64{1, 2, 3, 4}, 75))
}

func TestLatencySummaries(t *testing.T) {
	ms := int64(time.Millisecond)
	h := newHistogram()
	for _, v := range []int64{9 * ms, 1 * ms, 3 * ms, 2 * ms} {
		h.record(v)
	}
	l := h.latency()
	assert.InDelta(t, 2, l.P50, 2*0.01)
	assert.InDelta(t, 9, l.P95, 9*0.01)
	assert.InDelta(t, 9, l.P99, 9*0.01)
	assert.Equal(t, 9.0, l.Max, "max is exact")
	assert.Equal(t, int64(4), l.Samples)

	m := medianLatency([]LatencyStat{
		{P50: 1, P95: 10, P99: 20, Max: 100, Samples: 5},
		{P50: 3, P95: 30, P99: 40, Max: 50, Samples: 6},
		{P50: 2, P95: 20, P99: 30, Max: 70, Samples: 7},
	})
	assert.Equal(t, &LatencyStat{P50: 2, P95: 20, P99: 30, Max: 70, Samples: 18}, m)
	assert.Nil(t, medianLatency(nil))
}

func TestTracker(t *testing.T) {
	tr := newTracker()
	a, b := outbox.MessageID{15: 1}, outbox.MessageID{15: 2}
	tr.committed([]outbox.MessageID{a})
	time.Sleep(2 * time.Millisecond)
	tr.delivered(a)
	// b is delivered before its producer records the commit.
	tr.delivered(b)
	tr.committed([]outbox.MessageID{b})
	lat, early := tr.result()
	assert.Equal(t, int64(2), lat.Samples)
	assert.Equal(t, int64(1), early)
	assert.GreaterOrEqual(t, lat.Max, 2.0, "a: at least the 2 ms slept")
	assert.Less(t, lat.P50, 2.0, "b: delivered first, counted as 0")
	for i := range tr.shards {
		assert.Empty(t, tr.shards[i].pending, "no entry outlives its delivery")
	}
	assert.Zero(t, tr.inFlight())
	tr.committed([]outbox.MessageID{{15: 3}})
	assert.Equal(t, int64(1), tr.inFlight(), "committed, not delivered")
}

// TestTrackerReportsStartupApart: a message committed before the pipeline
// counted as started is measured in the start-up's figure, not the run's.
func TestTrackerReportsStartupApart(t *testing.T) {
	tr := newTracker()
	early, late := outbox.MessageID{15: 1}, outbox.MessageID{15: 2}
	tr.committed([]outbox.MessageID{early, late})
	// Commit times set by hand, so the split does not hang on the clock.
	tr.shard(early).pending[early] = 100
	tr.shard(late).pending[late] = 300
	tr.settled.Store(200)
	tr.delivered(early)
	tr.delivered(late)
	lat, _ := tr.result()
	start, n := tr.startupResult()
	assert.Equal(t, int64(1), lat.Samples)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, int64(1), start.Samples)
	assert.Zero(t, tr.inFlight())
	assert.Equal(t, "1.0 / 2.0 / 3.0 / 4.0", fmtExtra(&LatencyStat{P50: 1, P95: 2, P99: 3, Max: 4}))
	assert.Equal(t, "1.0 / 2.0 / 3.0 / 4.0", fmtExtra(map[string]any{"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "max_ms": 4.0}),
		"read back from JSON")
}

func TestFormatting(t *testing.T) {
	assert.Equal(t, "41,297", fmtCount(41297.4))
	assert.Equal(t, "999", fmtCount(999))
	assert.Equal(t, "1,000,000", fmtCount(1e6))
	assert.Equal(t, "-1,234", fmtCount(-1234))
	assert.Equal(t, "5 [4-6]", fmtStat(newStat([]float64{4, 5, 6})))
	assert.Equal(t, "0.50 [0.25-2.00]", fmtRatio(ratioStat([]float64{1, 1, 2}, []float64{4, 2, 1})))
	assert.Equal(t, "0.50", fmtRatio(ratioStat([]float64{1, 1}, []float64{0, 2})), "a run whose divisor is 0 is left out")
	assert.Equal(t, "n/a (its divisor was 0 in every run)", fmtRatio(ratioStat([]float64{1}, []float64{0})))
}

// TestCapacityJudge: a step kept up when its producers reached the offered
// rate and the backlog, sampled every second, did not grow by 2% of the
// rate a second; producers that could not offer the rate end the ladder.
func TestCapacityJudge(t *testing.T) {
	t.Parallel()
	run := func(enq float64, series ...int64) pipelineRun {
		return pipelineRun{enqueueRate: enq, committed: int64(enq) * 4, window: 4 * time.Second, drainAfter: 100 * time.Millisecond,
			backlogSeries: series[:len(series)-1], backlogFinal: series[len(series)-1]}
	}
	ok := judge(10000, run(9900, 2000, 2100, 1900, 2050), 0)
	assert.True(t, ok.KeptUp, "a steady backlog of latency times rate")
	assert.False(t, ok.ProducerLimited)
	assert.InDelta(t, 39600/4.1, ok.Delivered, 1, "the window's messages over window and drain")
	behind := judge(10000, run(9900, 2000, 2500, 3000, 3500), 0)
	assert.False(t, behind.KeptUp, "500 more a second: 5% of the rate")
	assert.InDelta(t, 500, behind.BacklogSlope, 0.001)
	assert.Equal(t, int64(1500), behind.BacklogGrowth)
	pl := judge(10000, run(9000, 0, 0), 0)
	assert.True(t, pl.ProducerLimited, "the producers reached 90% of the offered rate")
	assert.True(t, pl.KeptUp, "with what they committed")
	assert.False(t, judge(10000, run(9000, 0, 900), 0).KeptUp, "900 more a second: 10% of what was committed")

	// One commit of each of 32 producers of 100 (3,200) landing in the
	// window's last seconds is the commits' rhythm, not a pipeline falling
	// behind (seen: slope 278 a second at 12k msgs/s, a ladder ended there).
	rhythm := run(12000, 0, 0, 0, 0, 0, 0, 0, 0, 1600, 3200, 3200)
	assert.Greater(t, judge(12000, rhythm, 0).BacklogSlope, 240.0)
	assert.Less(t, judge(12000, rhythm, 0).BacklogSlope, 320.0)
	assert.False(t, judge(12000, rhythm, 0).KeptUp, "above 2% of the rate")
	assert.True(t, judge(12000, rhythm, 3200).KeptUp, "under one commit per producer over the window")
	var falling []int64
	for i := range 11 {
		falling = append(falling, int64(500*i))
	}
	assert.False(t, judge(12000, run(12000, falling...), 3200).KeptUp, "500 more a second for 10 s: behind, whatever the rhythm")
	assert.Zero(t, slope([]int64{5}))
	assert.InDelta(t, -2, slope([]int64{10, 8, 6}), 1e-9)
}

// TestCapacityClimb: the ladder climbs 25% a step until a step falls
// behind, then bisects that gap twice, so the figure is within about 6% of
// the rate where the pipeline stops keeping up; producers that fall short
// end it; a ladder that fails at its first step steps down to a step that
// keeps up and bisects from there, and one that never keeps up down to a
// tenth of its start reports nothing.
func TestCapacityClimb(t *testing.T) {
	t.Parallel()
	limit := func(capacity, producers float64) func(float64) (CapacityStep, error) {
		return func(offered float64) (CapacityStep, error) {
			return CapacityStep{Offered: offered, Delivered: min(offered, capacity), KeptUp: offered <= capacity,
				ProducerLimited: offered > producers}, nil
		}
	}
	offered := func(l []CapacityStep) []float64 {
		var o []float64
		for _, s := range l {
			o = append(o, math.Round(s.Offered))
		}
		return o
	}
	ladder, best, pl, err := climb(1000, limit(2100, math.Inf(1)))
	require.NoError(t, err)
	assert.False(t, pl)
	// 1000, 1250, 1563 and 1953 keep up, 2441 does not; then √(1953·2441)
	// = 2184 does not, √(1953·2184) = 2065 does.
	assert.Equal(t, []float64{1000, 1250, 1563, 1953, 2441, 2184, 2065}, offered(ladder))
	assert.InDelta(t, 2065, best, 1)
	assert.Greater(t, best, 2100/1.06)

	ladder, best, pl, err = climb(1000, limit(1e9, 1500))
	require.NoError(t, err)
	assert.True(t, pl, "the producers could not offer 1,563")
	assert.Equal(t, []float64{1000, 1250, 1563}, offered(ladder))
	assert.InDelta(t, 1563, best, 1, "the pipeline kept up with what they committed")

	ladder, best, pl, err = climb(1000, limit(700, math.Inf(1)))
	require.NoError(t, err)
	assert.False(t, pl)
	// 1000 falls behind, 800 too, 640 keeps up; then √(640·800) = 716 does
	// not, √(640·716) = 677 does.
	assert.Equal(t, []float64{1000, 800, 640, 716, 677}, offered(ladder))
	assert.InDelta(t, 677, best, 1)

	// Producers that fall short on the way down (a noisy step: they
	// offered 1000) end the ladder there too.
	ladder, best, pl, err = climb(1000, func(offered float64) (CapacityStep, error) {
		s, err := limit(700, math.Inf(1))(offered)
		s.ProducerLimited = math.Round(offered) == 800
		return s, err
	})
	require.NoError(t, err)
	assert.True(t, pl, "the producers could not offer 800 on the way down")
	assert.Equal(t, []float64{1000, 800}, offered(ladder))
	assert.Zero(t, best)

	ladder, best, _, err = climb(1000, limit(50, math.Inf(1)))
	require.NoError(t, err)
	// 1000 / 1.25^n down to 107 (the last at or above 100), none kept up.
	assert.Len(t, ladder, 11)
	assert.Zero(t, best, "no step kept up")

	boom := errors.New("boom")
	_, _, _, err = climb(1000, func(float64) (CapacityStep, error) { return CapacityStep{}, boom })
	assert.ErrorIs(t, err, boom)
}
