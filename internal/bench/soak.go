package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// soakEdge is the stretch at each end of a soak whose delivered rates are
// compared: the first minute against the last.
const soakEdge = time.Minute

// soakFigure runs the sustained shape for SoakDuration at a steady offered
// rate below the pipeline's maximum, sampling every SoakInterval: with a
// cost that stays flat every sample looks like the first; with one that
// grows (dead rows, table files, memory), deliveries fall behind the
// producers and the backlog climbs. One run whatever Runs: it is long, and
// its ratios compare its own first and last minutes.
func (b *bencher) soakFigure(ctx context.Context, producers int) ([]Result, error) {
	rate, source, err := b.soakRate(ctx, producers)
	if err != nil {
		return nil, err
	}
	batch := b.opts.Batch
	pace := paceFor(float64(rate), producers, batch)
	variant := fmt.Sprintf("%s msgs/s offered, %s, %d partitions, %v", fmtCount(float64(rate)),
		sustainedVariant(batch, producers), b.opts.Partitions, b.opts.SoakDuration)
	s := newSoakSampler(b, edgeSamples(b.opts.SoakDuration, b.opts.SoakInterval))
	spec := pipelineSpec{
		partitions: b.opts.Partitions, producers: producers, batch: batch,
		window: b.opts.SoakDuration, pace: pace, watch: s.watch,
	}
	var use usageStats
	mark := b.logs.snapshot()
	pr, err := b.pipelineOnce(ctx, fmt.Sprintf("%s %s", ScenarioSoak, variant), &use, spec, delivered)
	// A soak that fails after minutes still reports its samples: they
	// show how it got there.
	res := sustainedResult(ScenarioSoak, variant, []pipelineRun{pr}, &use)
	delete(res.Extra, "backlog_per_second") // the samples say it with more
	res.Samples = s.samples
	res.Extra["offered_msgs_per_sec"] = float64(rate)
	res.Extra["offered_rate_from"] = source
	b.logs.since(mark, res.Extra)
	s.put(&res)
	if err != nil {
		res.Extra["failed"] = err.Error()
	}
	return []Result{res}, err
}

// soakRate is SoakRate, or SoakRateShareDefault of the throughput of a
// sustained window (Duration) measured now, on fresh tables: its messages
// over the time until the last was delivered.
func (b *bencher) soakRate(ctx context.Context, producers int) (int, string, error) {
	if b.opts.SoakRate > 0 {
		return b.opts.SoakRate, "--soak-rate", nil
	}
	var use usageStats
	spec := b.sustainedSpec(b.opts.Partitions, producers)
	label := fmt.Sprintf("%s calibration: sustained %s, %v", ScenarioSoak, sustainedVariant(b.opts.Batch, producers), b.opts.Duration)
	pr, err := b.pipelineOnce(ctx, label, &use, spec, delivered)
	if err != nil {
		return 0, "", err
	}
	rate := max(int(pr.throughput()*SoakRateShareDefault), 1)
	return rate, fmt.Sprintf("%.0f%% of a %v sustained run: %s msgs/s", 100*SoakRateShareDefault, b.opts.Duration, fmtCount(pr.throughput())), nil
}

// edgeSamples is how many samples make up soakEdge, at most half the run
// (a short soak compares its halves).
func edgeSamples(duration, interval time.Duration) int {
	return max(int(min(soakEdge, duration/2)/interval), 1)
}

// soakSampler takes the soak's samples. It keeps the latency histograms
// of the first and of the latest edge intervals only: its memory does not
// grow with the soak's length.
type soakSampler struct {
	b       *bencher
	edge    int
	samples []Sample
	first   []*histogram // the first edge intervals
	recent  []*histogram // the latest edge intervals
	// counted is when the acked rows waiting for the vacuum were last
	// counted (waitingVacuumEvery).
	counted time.Time
}

// waitingVacuumEvery is how often the soak counts the acked rows waiting
// for the vacuum: the first and last samples, and one a minute between.
// The count reads every such row (up to a few hundred thousand with
// rotation); on PostgreSQL, once per 10 s sample, it took 1.5 s of server
// time, about 7% of the two cores being measured.
const waitingVacuumEvery = time.Minute

func newSoakSampler(b *bencher, edge int) *soakSampler {
	return &soakSampler{b: b, edge: edge}
}

// soakMark is where the previous sample left the counters.
type soakMark struct {
	at                 time.Time
	handled, committed int64
}

// watch samples every SoakInterval until ctx ends (the producers
// stopped), then once more if most of an interval has passed since the
// last sample, so the last edge ends where the window does.
func (s *soakSampler) watch(ctx context.Context, w *pipelineWatch) error {
	interval := s.b.opts.SoakInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	w.tr.nextWindow()
	mark := soakMark{at: w.began, handled: w.handled.Load(), committed: w.committed.Load()}
	logs := s.b.logs.snapshot()
	for {
		select {
		case <-ctx.Done():
			if time.Since(mark.at) < interval/2 {
				return nil
			}
			return s.sample(context.WithoutCancel(ctx), w, &mark, logs, true)
		case <-t.C:
			if err := s.sample(ctx, w, &mark, logs, false); err != nil {
				return err
			}
		}
	}
}

// sample reads the counters first (the interval ends there), then asks the
// database and the runtime for sizes.
func (s *soakSampler) sample(ctx context.Context, w *pipelineWatch, mark *soakMark, logs logSnapshot, last bool) error {
	now := time.Now()
	handled, committed := w.handled.Load(), w.committed.Load()
	interval := w.tr.nextWindow()
	dt := now.Sub(mark.at).Seconds()
	smp := Sample{
		AtSec:           now.Sub(w.began).Seconds(),
		DeliveredPerSec: float64(handled-mark.handled) / dt,
		CommittedPerSec: float64(committed-mark.committed) / dt,
		LatencyP50Ms:    float64(interval.percentile(50)) / 1e6,
		LatencyP99Ms:    float64(interval.percentile(99)) / 1e6,
	}
	*mark = soakMark{at: now, handled: handled, committed: committed}
	s.keep(interval)

	var err error
	if smp.Incoming, smp.Unprocessed, err = backlog(ctx, w.r.d); err != nil {
		return err
	}
	if last || s.counted.IsZero() || now.Sub(s.counted) >= waitingVacuumEvery {
		n, err := waitingVacuum(ctx, w.r.d)
		if err != nil {
			return err
		}
		smp.WaitingVacuum, s.counted = &n, now
	}
	if smp.Storage, err = readStorage(ctx, w.r.d); err != nil {
		return err
	}
	if smp.TableRows = smp.Storage.LiveRows; smp.TableRows == nil {
		// SQLite keeps no estimate; its count walks a b-tree in process.
		rows := map[string]int64{}
		if err := tableRows(ctx, w.r.d, "soak", rows); err != nil {
			return err
		}
		smp.TableRows = map[string]int64{}
		for k, n := range rows {
			smp.TableRows[strings.TrimPrefix(k, "soak.")] = n
		}
	}
	extra := map[string]any{}
	s.b.logs.since(logs, extra)
	smp.LogErrors, smp.LogWarnings = extra["log_errors"].(int64), extra["log_warnings"].(int64)
	smp.HeapLiveBytes, smp.RSSBytes, smp.Goroutines = processMemory()
	smp.TrackedInFlight = w.tr.inFlight()
	s.samples = append(s.samples, smp)
	return nil
}

// keep holds an interval's histogram if it belongs to the first edge or
// may belong to the last.
func (s *soakSampler) keep(h *histogram) {
	if len(s.first) < s.edge {
		s.first = append(s.first, h)
		return
	}
	s.recent = append(s.recent, h)
	if len(s.recent) > s.edge {
		s.recent = s.recent[1:]
	}
}

// put adds the first and last edges' rates and latencies, their ratios and
// the largest value of every sampled size to res.
func (s *soakSampler) put(res *Result) {
	n := len(s.samples)
	extra := res.Extra
	extra["samples"] = n
	if n >= 2 {
		k := min(s.edge, n/2)
		label := fmt.Sprintf("%v", time.Duration(float64(time.Second)*s.samples[k-1].AtSec).Round(time.Second))
		first, last := edgeRate(s.samples, 0, k), edgeRate(s.samples, n-k, n)
		extra["edge"] = fmt.Sprintf("first and last %d samples (%s each)", k, label)
		extra["first_edge_delivered_msgs_per_sec"] = first
		extra["last_edge_delivered_msgs_per_sec"] = last
		// recent drops intervals only once it holds edge of them, so the
		// last k of first followed by recent are the run's last k.
		tail := append(s.first[:len(s.first):len(s.first)], s.recent...)
		firstH, lastH := merged(s.first[:k]), merged(tail[len(tail)-k:])
		extra["first_edge_latency_p99_ms"] = float64(firstH.percentile(99)) / 1e6
		extra["last_edge_latency_p99_ms"] = float64(lastH.percentile(99)) / 1e6
		if first > 0 {
			res.Ratios = append(res.Ratios, Ratio{Name: "delivered msgs/s last/first " + label, Stat: newStat([]float64{last / first})})
		}
		if p := firstH.percentile(99); p > 0 {
			res.Ratios = append(res.Ratios, Ratio{Name: "latency p99 last/first " + label,
				Stat: newStat([]float64{float64(lastH.percentile(99)) / float64(p)})})
		}
	}
	maxOf := func(get func(Sample) int64) int64 {
		var m int64
		for _, smp := range s.samples {
			m = max(m, get(smp))
		}
		return m
	}
	maxByKey := func(get func(Sample) map[string]int64) map[string]int64 {
		m := map[string]int64{}
		for _, smp := range s.samples {
			for k, v := range get(smp) {
				m[k] = max(m[k], v)
			}
		}
		return m
	}
	extra["max_incoming"] = maxOf(func(s Sample) int64 { return s.Incoming })
	extra["max_unprocessed"] = maxOf(func(s Sample) int64 { return s.Unprocessed })
	extra["max_waiting_vacuum"] = maxOf(func(s Sample) int64 { return valueOr0(s.WaitingVacuum) })
	extra["max_table_rows"] = maxByKey(func(s Sample) map[string]int64 { return s.TableRows })
	if m := maxByKey(func(s Sample) map[string]int64 { return s.Storage.TableBytes }); len(m) > 0 {
		extra["max_table_bytes"] = m
	}
	if m := maxByKey(func(s Sample) map[string]int64 { return s.Storage.DeadTuples }); len(m) > 0 {
		extra["max_dead_tuples"] = m
	}
	for key, get := range map[string]func(Sample) int64{
		"max_history_length": func(s Sample) int64 { return s.Storage.HistoryLength },
		"max_file_bytes":     func(s Sample) int64 { return s.Storage.FileBytes },
		"max_wal_bytes":      func(s Sample) int64 { return s.Storage.WALBytes },
	} {
		if m := maxOf(get); m > 0 {
			extra[key] = m
		}
	}
	extra["max_heap_live_bytes"] = maxOf(func(s Sample) int64 { return s.HeapLiveBytes })
	extra["max_rss_bytes"] = maxOf(func(s Sample) int64 { return s.RSSBytes })
	extra["max_goroutines"] = maxOf(func(s Sample) int64 { return int64(s.Goroutines) })
}

// edgeRate is the delivered rate over samples [from, to), weighted by each
// interval's length.
func edgeRate(samples []Sample, from, to int) float64 {
	var msgs, secs float64
	for i := from; i < to; i++ {
		prev := 0.0
		if i > 0 {
			prev = samples[i-1].AtSec
		}
		dt := samples[i].AtSec - prev
		msgs += samples[i].DeliveredPerSec * dt
		secs += dt
	}
	if secs == 0 {
		return 0
	}
	return msgs / secs
}

// merged sums histograms into a new one.
func merged(hs []*histogram) *histogram {
	out := newHistogram()
	for _, h := range hs {
		out.merge(h)
	}
	return out
}

// valueOr0 is *n, or 0 for a figure not read.
func valueOr0(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}
