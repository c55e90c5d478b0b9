package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/outbox"
)

// newStat summarises per-run figures: median (mean of the middle two for an
// even count), min and max; Runs keeps the run order.
func newStat(runs []float64) Stat {
	if len(runs) == 0 {
		return Stat{}
	}
	sorted := slices.Clone(runs)
	slices.Sort(sorted)
	return Stat{Median: median(sorted), Min: sorted[0], Max: sorted[len(sorted)-1], Runs: slices.Clone(runs)}
}

// median of sorted values; 0 for none.
func median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return sorted[n/2]
	default:
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
}

// percentile is the nearest-rank percentile (0 < p <= 100) of sorted
// values: the smallest value with at least p% of the values at or below
// it, so p99 of 100 samples is the 99th and never an interpolation.
func percentile[T int64 | float64](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// medianLatency takes each field's median over runs.
func medianLatency(runs []LatencyStat) *LatencyStat {
	if len(runs) == 0 {
		return nil
	}
	field := func(get func(LatencyStat) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return median(v)
	}
	out := &LatencyStat{
		P50: field(func(l LatencyStat) float64 { return l.P50 }),
		P95: field(func(l LatencyStat) float64 { return l.P95 }),
		P99: field(func(l LatencyStat) float64 { return l.P99 }),
		Max: field(func(l LatencyStat) float64 { return l.Max }),
	}
	for _, r := range runs {
		out.Samples += r.Samples
	}
	return out
}

// tracker measures commit → handler latency. Producers record each
// message's commit time right after their transaction returns; the handler
// looks it up. Sharded maps keep producers and handlers off one lock, and
// int64 values avoid boxing every entry. Only messages in flight are kept:
// latencies go into fixed-size histograms, so the harness's memory does not
// grow with the length of a run.
type tracker struct {
	base   time.Time
	shards [trackerShards]trackerShard
	all    *histogram
	// window, when set, also receives every latency: the soak reads and
	// replaces it at each sample to get the interval's percentiles.
	window atomic.Pointer[histogram]
	early  atomic.Int64
	// settled is when the pipeline counts as started (ns since base):
	// messages committed before it go to startup instead of all. Zero
	// (the default) puts every message in all.
	settled atomic.Int64
	startup *histogram
}

const trackerShards = 64

// deliveredFirst marks a message the handler saw before its producer
// recorded the commit (the pipeline can be that fast): the late record
// then removes the entry instead of leaking it.
const deliveredFirst = -1

type trackerShard struct {
	mu      sync.Mutex
	pending map[outbox.MessageID]int64 // commit time, ns since base, or deliveredFirst
}

func newTracker() *tracker {
	t := &tracker{base: time.Now(), all: newHistogram(), startup: newHistogram()}
	for i := range t.shards {
		t.shards[i].pending = make(map[outbox.MessageID]int64)
	}
	return t
}

// now reads the monotonic clock, immune to wall-clock steps.
func (t *tracker) now() int64 { return int64(time.Since(t.base)) }

func (t *tracker) shard(id outbox.MessageID) *trackerShard {
	return &t.shards[int(id[15])%trackerShards] // the last byte is random in a UUIDv7
}

// committed records the commit time of ids.
func (t *tracker) committed(ids []outbox.MessageID) {
	at := t.now()
	for _, id := range ids {
		s := t.shard(id)
		s.mu.Lock()
		if s.pending[id] == deliveredFirst {
			delete(s.pending, id)
		} else {
			s.pending[id] = at
		}
		s.mu.Unlock()
	}
}

// delivered records one handler call.
func (t *tracker) delivered(id outbox.MessageID) {
	at := t.now()
	s := t.shard(id)
	s.mu.Lock()
	latency, measured := int64(0), true
	switch v, found := s.pending[id]; {
	case !found:
		// Delivered before the producer recorded its commit: latency ~0.
		s.pending[id] = deliveredFirst
		t.early.Add(1)
	case v != deliveredFirst:
		delete(s.pending, id)
		latency = at - v
		if v < t.settled.Load() {
			s.mu.Unlock()
			t.startup.record(latency)
			return
		}
	default:
		measured = false // delivered again before its commit was recorded
	}
	s.mu.Unlock()
	if !measured {
		return
	}
	t.all.record(latency)
	if w := t.window.Load(); w != nil {
		w.record(latency)
	}
}

// inFlight is how many messages the tracker holds: committed and not yet
// delivered (and a few delivered first). The harness's memory grows with
// it, that is with the backlog, not with the length of a run.
func (t *tracker) inFlight() int64 {
	var n int64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += int64(len(s.pending))
		s.mu.Unlock()
	}
	return n
}

// settleAfter reports the messages committed from now until d has passed
// apart, as the start-up's (startupResult), not in result.
func (t *tracker) settleAfter(d time.Duration) {
	t.settled.Store(t.now() + int64(d))
}

// result summarises every latency measured (but the start-up's) and counts
// early deliveries.
func (t *tracker) result() (LatencyStat, int64) {
	return t.all.latency(), t.early.Load()
}

// startupResult summarises the latencies of the messages committed before
// the pipeline counted as started (settleAfter), and counts them.
func (t *tracker) startupResult() (LatencyStat, int64) {
	return t.startup.latency(), t.startup.count()
}

// nextWindow starts a new interval histogram and returns the one it
// replaces (nil the first time).
func (t *tracker) nextWindow() *histogram {
	return t.window.Swap(newHistogram())
}

// errEnough ends a producer whose share of a fixed total is written.
var errEnough = errors.New("bench: enough messages")

// produce runs n producers that call step until d has passed (or, for a
// fixed total, until step returns errEnough) and returns how long they ran;
// committed counts the messages of every successful step. With pace > 0
// each producer keeps a schedule (pacer): a step that took longer than pace
// is followed at once by the ones it held up, so the producers offer n/pace
// steps a second whenever their steps' mean time allows it, however the
// database's response times vary. Skipping the missed ticks instead had
// offered 766–936 of 1,000 msgs/s on a busy machine (BENCHMARKS.md, "The
// latency scenario's producers fall short of 1,000 msgs/s").
func produce(ctx context.Context, n int, d, pace time.Duration, committed *atomic.Int64,
	step func(ctx context.Context, producer int) (int, error)) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	var deadline time.Time
	// ended closes at the deadline: a producer waiting for its next step
	// (a slow pace) stops there instead of a whole pace later.
	ended := make(chan struct{})
	if d > 0 {
		deadline = start.Add(d)
		stop := time.AfterFunc(d, func() { close(ended) })
		defer stop.Stop()
	}
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			schedule := pacer{next: start, pace: pace}
			for ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)) {
				if wait := schedule.wait(time.Now()); wait > 0 && !sleepUnless(ctx, ended, wait) {
					return
				}
				k, err := step(ctx, p)
				if errors.Is(err, errEnough) {
					return
				}
				if err != nil {
					cancel(fmt.Errorf("producer %d: %w", p, err))
					return
				}
				committed.Add(int64(k))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return elapsed, err
	}
	return elapsed, nil
}

// pacer is one producer's schedule: with pace > 0 its k-th step is due at
// start + k×pace, whenever the steps before it ended; with pace 0 every
// step is due at once.
type pacer struct {
	next time.Time
	pace time.Duration
}

// wait is how long from now until the next step is due (0 when it is
// late), and moves the schedule on by one step.
func (p *pacer) wait(now time.Time) time.Duration {
	if p.pace <= 0 {
		return 0
	}
	p.next = p.next.Add(p.pace)
	return max(p.next.Sub(now), 0)
}

// sleepUnless waits d and reports true, or false as soon as ended closes or
// ctx ends.
func sleepUnless(ctx context.Context, ended <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ended:
		return false
	case <-ctx.Done():
		return false
	}
}

// progress draws one status line on a writer, redrawn with "\r" while a run
// goes on and ended with a newline when it is over. Nil-safe: without a
// writer every method does nothing.
type progress struct {
	w     io.Writer
	mu    sync.Mutex // one writer at a time: the ticker goroutine and finish
	width int
	dirty bool
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w}
}

func (p *progress) draw(line string, final bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pad := ""
	if n := len(line); n < p.width {
		pad = strings.Repeat(" ", p.width-n) // erase a longer previous line
	}
	p.width = len(line)
	end := ""
	if final {
		end, p.width = "\n", 0
	}
	p.dirty = !final
	_, _ = fmt.Fprintf(p.w, "\r%s%s%s", line, pad, end)
}

// live redraws status() every half second until the returned stop is called.
func (p *progress) live(status func(elapsed time.Duration) string) (stop func()) {
	if p == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.draw(status(time.Since(start)), false)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// close ends a line left open by an error.
func (p *progress) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		_, _ = fmt.Fprintln(p.w)
		p.dirty = false
	}
}
