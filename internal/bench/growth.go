package bench

import (
	"context"
	"fmt"
)

// ------------------------------------------------------------ held-snapshot

// heldSnapshotFigure runs the sustained shape twice per run, for
// HeldWindow each: plain, then while an unrelated transaction on another
// connection holds a snapshot (holdSnapshot). Deleted rows then cannot be
// cleaned up for the whole window on any database; a design whose reads
// skip them stays as fast, one whose reads walk them slows down as they
// pile up. The held figure carries the ratios held/plain, run by run.
func (b *bencher) heldSnapshotFigure(ctx context.Context, producers int) ([]Result, error) {
	shape := fmt.Sprintf("%s, %d partitions, %v window", sustainedVariant(b.opts.Batch, producers), b.opts.Partitions, b.opts.HeldWindow)
	if b.opts.HeldRate > 0 {
		shape = fmt.Sprintf("%s msgs/s offered, %s", fmtCount(float64(b.opts.HeldRate)), shape)
	}
	variants := [2]string{"plain, " + shape, "snapshot held, " + shape}
	var runs [2][]pipelineRun
	var use [2]usageStats
	var atEnd [2][]map[string]int64
	var logs [2]logDelta
	held := ""
	for i := range b.opts.Runs {
		for v, withHold := range []bool{false, true} {
			spec := b.sustainedSpec(b.opts.Partitions, producers)
			spec.window = b.opts.HeldWindow
			if b.opts.HeldRate > 0 {
				spec.pace = paceFor(float64(b.opts.HeldRate), producers, b.opts.Batch)
			}
			spec.windowEnd = func(ctx context.Context, r *run) error {
				st, err := readStorage(ctx, r.d)
				if err != nil {
					return err
				}
				atEnd[v] = append(atEnd[v], st.summary())
				return nil
			}
			if withHold {
				spec.hold = func(ctx context.Context, r *run) (func(context.Context) error, error) {
					release, what, err := holdSnapshot(ctx, r)
					held = what
					return release, err
				}
			}
			mark := b.logs.snapshot()
			pr, err := b.pipelineOnce(ctx, b.runLabel(ScenarioHeldSnapshot, variants[v], i), &use[v], spec, delivered)
			logs[v].add(b.logs, mark)
			if err != nil {
				return nil, err
			}
			runs[v] = append(runs[v], pr)
		}
	}
	out := make([]Result, 2)
	for v := range out {
		res := sustainedResult(ScenarioHeldSnapshot, variants[v], runs[v], &use[v])
		res.Extra["backlog_growth"] = perRun(runs[v], func(p pipelineRun) int64 { return p.backlogGrowth() })
		res.Extra["backlog_growth_per_sec"] = values(runs[v], func(p pipelineRun) float64 { return slope(p.backlogSeries) })
		res.Extra["storage_at_window_end"] = atEnd[v]
		logs[v].put(res.Extra)
		out[v] = res
	}
	out[1].Extra["held"] = held
	plain, hold := runs[0], runs[1]
	out[1].Ratios = []Ratio{
		{Name: "delivered msgs/s held/plain", Stat: ratioOf(hold, plain, delivered)},
		{Name: "latency p50 held/plain", Stat: ratioOf(hold, plain, p50)},
		{Name: "latency p99 held/plain", Stat: ratioOf(hold, plain, p99)},
	}
	return out, nil
}

// slope is the least-squares growth per step of series (per second for
// the backlog samples): less at the mercy of one noisy sample than last
// minus first. 0 for fewer than two points.
func slope(series []int64) float64 {
	n := float64(len(series))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range series {
		x := float64(i)
		sx, sy, sxx, sxy = sx+x, sy+float64(y), sxx+x*x, sxy+x*float64(y)
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func p50(p pipelineRun) float64 { return p.latency.P50 }
func p99(p pipelineRun) float64 { return p.latency.P99 }

// ratioOf divides get of num by get of den, run by run.
func ratioOf(num, den []pipelineRun, get func(pipelineRun) float64) Stat {
	return ratioStat(values(num, get), values(den, get))
}

func values(runs []pipelineRun, get func(pipelineRun) float64) []float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	return v
}

func perRun(runs []pipelineRun, get func(pipelineRun) int64) []int64 {
	v := make([]int64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	return v
}

// logDelta sums what seqbox logged during several runs.
type logDelta struct{ extra map[string]any }

func (l *logDelta) add(c *logCounts, before logSnapshot) {
	one := map[string]any{}
	c.since(before, one)
	if l.extra == nil {
		l.extra = one
		return
	}
	for _, key := range []string{"log_errors", "log_warnings"} {
		l.extra[key] = l.extra[key].(int64) + one[key].(int64)
	}
	if msgs, ok := one["log_messages"].(map[string]int64); ok {
		all, _ := l.extra["log_messages"].(map[string]int64)
		if all == nil {
			all = map[string]int64{}
		}
		for msg, n := range msgs {
			all[msg] += n
		}
		l.extra["log_messages"], l.extra["log_last_error"] = all, one["log_last_error"]
	}
}

func (l *logDelta) put(extra map[string]any) {
	for k, v := range l.extra {
		extra[k] = v
	}
}

// ------------------------------------------------------------ partitions

// partitionSweepFigure measures, for each count of PartitionSweep, the
// sustained shape and the fixed-rate latency shape (Duration each), the
// counts alternating within a run so that all see the same drift. Every
// count after the first carries its ratios to the first, run by run: with
// a cost per partition that stays flat they are 1.
func (b *bencher) partitionSweepFigure(ctx context.Context, producers int) ([]Result, error) {
	counts := b.opts.PartitionSweep
	type shape struct {
		variant func(n int) string
		spec    func(n int) pipelineSpec
		rate    func(pipelineRun) float64
	}
	sustainedName := func(n int) string {
		return fmt.Sprintf("%d partitions, sustained %s", n, sustainedVariant(b.opts.Batch, producers))
	}
	latencyName := func(n int) string { return fmt.Sprintf("%d partitions, latency %s", n, b.latencyVariant(producers)) }
	shapes := []shape{
		{variant: sustainedName, spec: func(n int) pipelineSpec { return b.sustainedSpec(n, producers) }, rate: delivered},
		{variant: latencyName, spec: func(n int) pipelineSpec { return b.latencySpec(n, producers) }, rate: enqueued},
	}
	runs := make([][][]pipelineRun, len(shapes)) // [shape][count][run]
	use := make([][]usageStats, len(shapes))
	logs := make([][]logDelta, len(shapes))
	for s := range shapes {
		runs[s], use[s], logs[s] = make([][]pipelineRun, len(counts)), make([]usageStats, len(counts)), make([]logDelta, len(counts))
	}
	for i := range b.opts.Runs {
		for c, n := range counts {
			for s, sh := range shapes {
				mark := b.logs.snapshot()
				pr, err := b.pipelineOnce(ctx, b.runLabel(ScenarioPartitions, sh.variant(n), i), &use[s][c], sh.spec(n), sh.rate)
				logs[s][c].add(b.logs, mark)
				if err != nil {
					return nil, err
				}
				runs[s][c] = append(runs[s][c], pr)
			}
		}
	}
	var out []Result
	for c, n := range counts {
		sus := sustainedResult(ScenarioPartitions, shapes[0].variant(n), runs[0][c], &use[0][c])
		lat := latencyResult(ScenarioPartitions, shapes[1].variant(n), runs[1][c], &use[1][c])
		logs[0][c].put(sus.Extra)
		logs[1][c].put(lat.Extra)
		if c > 0 {
			of := fmt.Sprintf("%d/%d partitions", n, counts[0])
			sus.Ratios = []Ratio{
				{Name: "sustained msgs/s " + of, Stat: ratioOf(runs[0][c], runs[0][0], delivered)},
				{Name: "sustained latency p99 " + of, Stat: ratioOf(runs[0][c], runs[0][0], p99)},
			}
			lat.Ratios = []Ratio{
				{Name: "latency p50 " + of, Stat: ratioOf(runs[1][c], runs[1][0], p50)},
				{Name: "latency p99 " + of, Stat: ratioOf(runs[1][c], runs[1][0], p99)},
			}
		}
		out = append(out, sus, lat)
	}
	return out, nil
}
