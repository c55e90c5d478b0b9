package ui

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seqbox/seqbox/outbox"
)

// The sampler behind the overview's charts (docs/ARCHITECTURE.md, "The web
// UI"): one goroutine per Handler, so one Stats read per interval in the
// process however many browsers are open, and a bounded ring of samples per
// queue in memory.

const (
	// chartWindow is how far back the charts reach.
	chartWindow = time.Hour
	// maxSlots caps a queue's ring whatever the interval (an interval
	// under a second covers less than an hour).
	maxSlots = 3600
	// minReadTimeout bounds a Stats read that hangs, so a stuck connection
	// shows as a gap instead of stopping the charts for good.
	minReadTimeout = 10 * time.Second
)

// statsSource is what the sampler reads: *seqbox.Admin, or a fake in tests.
type statsSource interface {
	Stats(ctx context.Context) (outbox.Stats, error)
}

// point is one queue's sample.
type point struct {
	T time.Time
	// Backlog is Incoming+Unprocessed; Oldest the age of the oldest
	// unprocessed message at T (0 when nothing waits).
	Backlog int64
	Oldest  time.Duration
	// Delivered is the sum of the queue's partitions' ProcessedSeq, the
	// count the rate derives from.
	Delivered int64
	// Rate is delivered/s since the queue's previous point; HasRate is
	// false for a first point, after the queue was absent, and after the
	// sum went down (a reset).
	Rate    float64
	HasRate bool
	// Break starts a new line: samples were missed before it.
	Break bool
}

// ring keeps the newest cap points, oldest first.
type ring struct {
	buf   []point
	start int
	cap   int
}

func newRing(n int) *ring { return &ring{cap: n} }

func (r *ring) push(p point) {
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, p)
		return
	}
	r.buf[r.start] = p
	r.start = (r.start + 1) % r.cap
}

func (r *ring) len() int { return len(r.buf) }

// last is the newest point; ok is false when there is none.
func (r *ring) last() (point, bool) {
	if len(r.buf) == 0 {
		return point{}, false
	}
	return r.buf[(r.start+len(r.buf)-1)%len(r.buf)], true
}

// since copies, oldest first, the points at or after t.
func (r *ring) since(t time.Time) []point {
	out := make([]point, 0, len(r.buf))
	for i := range r.buf {
		p := r.buf[(r.start+i)%len(r.buf)]
		if !p.T.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// series is one queue's ring; absent marks a queue missing from the last
// successful sample, so its next point neither joins the line nor has a rate.
type series struct {
	ring   *ring
	absent bool
}

// sampler reads Stats every interval into per-queue rings. Its mutex
// guards the rings and counters, and is never held across the Stats read
// or across rendering.
type sampler struct {
	src      statsSource
	interval time.Duration
	window   time.Duration
	slots    int
	log      *slog.Logger
	now      func() time.Time

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	queues   map[string]*series
	reads    int  // reads attempted, failed ones included
	failures int  // consecutive failed reads
	gap      bool // a read failed since the last point
}

func newSampler(src statsSource, interval time.Duration, log *slog.Logger, now func() time.Time) *sampler {
	s := &sampler{
		src: src, interval: interval,
		log: log, now: now,
		queues: map[string]*series{},
		done:   make(chan struct{}),
	}
	s.setWindow(min(chartWindow, interval*maxSlots))
	return s
}

// setWindow sets how far back the charts reach, before start.
func (s *sampler) setWindow(window time.Duration) {
	s.window = window
	// One slot more than the window holds, so a full window of
	// intervals has both its ends; two at least, to draw a line.
	s.slots = min(max(int(window/s.interval)+1, 2), maxSlots)
}

// start runs the sampler: a read now, then one per tick, until stop.
// stopTick releases the ticker when the loop ends.
func (s *sampler) start(tick <-chan time.Time, stopTick func()) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		defer stopTick()
		s.sample(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
				s.sample(ctx)
			}
		}
	}()
}

// stop ends the loop, cancelling a read under way, and waits for it; a
// second call only waits.
func (s *sampler) stop() {
	s.once.Do(s.cancel)
	<-s.done
}

// sample reads Stats once and records a point per queue.
func (s *sampler) sample(ctx context.Context) {
	t := s.now()
	rctx, cancel := context.WithTimeout(ctx, max(s.interval, minReadTimeout))
	st, err := s.src.Stats(rctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: neither a failure nor a sample
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if err != nil {
		s.failures++
		s.gap = true
		if s.failures == 1 {
			// Logged once per outage; the recovery says how long it was.
			s.log.WarnContext(ctx, "seqbox ui: sampler: read stats failed; the charts have a gap until a read succeeds", "err", err)
		}
		return
	}
	if s.failures > 0 {
		s.log.InfoContext(ctx, "seqbox ui: sampler: read stats again", "failed_reads", s.failures)
		s.failures = 0
	}
	s.record(t, st)
}

// record adds the point of every queue in st at t. Called with mu held.
func (s *sampler) record(t time.Time, st outbox.Stats) {
	delivered := map[string]int64{}
	for _, p := range st.Partitions {
		delivered[p.Queue] += p.ProcessedSeq
	}
	seen := map[string]bool{}
	for _, q := range st.Queues {
		seen[q.Queue] = true
		p := point{T: t, Backlog: q.Incoming + q.Unprocessed, Delivered: delivered[q.Queue], Break: s.gap}
		if !q.OldestUnprocessed.IsZero() {
			p.Oldest = max(t.Sub(q.OldestUnprocessed), 0) // the database's clock may run ahead
		}
		sr := s.queues[q.Queue]
		if sr == nil {
			sr = &series{ring: newRing(s.slots)}
			s.queues[q.Queue] = sr
		}
		prev, ok := sr.ring.last()
		switch {
		case !ok || sr.absent:
			p.Break = true
		case p.Delivered >= prev.Delivered && t.After(prev.T):
			p.Rate = float64(p.Delivered-prev.Delivered) / t.Sub(prev.T).Seconds()
			p.HasRate = true
		}
		sr.absent = false
		sr.ring.push(p)
	}
	for name, sr := range s.queues {
		if seen[name] {
			continue
		}
		sr.absent = true
		if last, ok := sr.ring.last(); !ok || last.T.Before(t.Add(-s.window)) {
			delete(s.queues, name) // gone for the whole window: nothing left to draw
		}
	}
	s.gap = false
}

// history copies queue's points of the window ending at now, oldest first.
func (s *sampler) history(queue string, now time.Time) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.queues[queue]
	if sr == nil {
		return nil
	}
	return sr.ring.since(now.Add(-s.window))
}

// count is the number of reads attempted, for tests to wait on.
func (s *sampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}
