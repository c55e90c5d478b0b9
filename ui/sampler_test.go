package ui

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
)

// fakeStats returns its reads in order, then the last one again; block,
// when set, makes a read wait for its context.
type fakeStats struct {
	mu      sync.Mutex
	reads   []read
	i       int
	block   bool
	entered chan struct{}
}

type read struct {
	parts []outbox.PartitionStats
	err   error
}

func (f *fakeStats) Stats(ctx context.Context) (outbox.Stats, error) {
	f.mu.Lock()
	block := f.block
	r := f.reads[min(f.i, len(f.reads)-1)]
	f.i++
	f.mu.Unlock()
	if block {
		f.entered <- struct{}{}
		<-ctx.Done()
		return outbox.Stats{}, ctx.Err()
	}
	if r.err != nil {
		return outbox.Stats{}, r.err
	}
	return outbox.Stats{Partitions: r.parts, Queues: outbox.QueueTotals(r.parts)}, nil
}

// part is a partition with a cursor and a backlog.
func part(queue string, n int, processed, backlog int64) outbox.PartitionStats {
	return outbox.PartitionStats{Queue: queue, Partition: n, ProcessedSeq: processed, Sequence: processed + backlog, Unprocessed: backlog}
}

// clock is a fake clock that tests step.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSamplerRates(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	src := &fakeStats{reads: []read{
		{parts: []outbox.PartitionStats{part("a", 0, 10, 3), part("a", 1, 5, 0)}},                        // t0: first point
		{parts: []outbox.PartitionStats{part("a", 0, 20, 1), part("a", 1, 15, 0), part("b", 0, 100, 0)}}, // +10s: a 20 in 10s; b appears
		{parts: []outbox.PartitionStats{part("a", 0, 30, 0)}},                                            // +20s: a's sum went down (a partition gone); b gone
		{err: down}, {err: down}, // +30s, +40s: a gap, logged once
		{parts: []outbox.PartitionStats{part("a", 0, 60, 2), part("b", 0, 500, 0)}}, // +50s: a 30 in 30s; b back
		{parts: []outbox.PartitionStats{part("a", 0, 60, 2), part("b", 0, 520, 0)}}, // +60s
	}}
	logs := &dbtest.SyncBuffer{}
	c := &clock{t: t0}
	s := newSampler(src, 10*time.Second, slog.New(slog.NewTextHandler(logs, nil)), c.now)
	for range src.reads {
		s.sample(context.Background())
		c.step(10 * time.Second)
	}
	require.Equal(t, len(src.reads), s.count())

	type want struct {
		backlog int64
		rate    float64
		hasRate bool
		brk     bool
	}
	got := func(q string) []want {
		var out []want
		for _, p := range s.history(q, c.now()) {
			out = append(out, want{p.Backlog, p.Rate, p.HasRate, p.Break})
		}
		return out
	}
	require.Equal(t, []want{
		{3, 0, false, true},
		{1, 2, true, false},
		{0, 0, false, false}, // a reset: no rate, and never a negative one
		{2, 1, true, true},   // across the gap: the average, on a new line
		{2, 0, true, false},
	}, got("a"))
	require.Equal(t, []want{
		{0, 0, false, true},
		{0, 0, false, true}, // back after an absence: a new line, no rate
		{0, 2, true, false},
	}, got("b"))

	require.Equal(t, 1, strings.Count(logs.String(), "read stats failed"), logs.String())
	require.Contains(t, logs.String(), "connection refused")
	require.Equal(t, 1, strings.Count(logs.String(), "read stats again"))
	require.Contains(t, logs.String(), "failed_reads=2")

	ch := s.charts("a", c.now())
	require.Equal(t, "0.0", ch.Rate)
	require.Equal(t, "2", ch.Depth.Now)
	require.Equal(t, "3", ch.Depth.Max)
	require.Equal(t, "2.0", ch.Throughput.Max)
	require.Contains(t, ch.Depth.Label, "a: backlog over the last hour, now 2, max 3")
	require.Equal(t, 2, strings.Count(ch.Depth.Path, "M"), "the gap splits the line: %s", ch.Depth.Path)
	require.Equal(t, "—", s.charts("nope", c.now()).Rate)
	require.True(t, s.charts("nope", c.now()).Depth.Empty)
}

func TestSamplerOldest(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	p := part("a", 0, 1, 1)
	p.OldestUnprocessed = t0.Add(-90 * time.Second)
	ahead := part("b", 0, 1, 1)
	ahead.OldestUnprocessed = t0.Add(time.Second) // the database's clock runs ahead of ours
	s := newSampler(&fakeStats{reads: []read{{parts: []outbox.PartitionStats{p, ahead}}}}, time.Second, slog.New(slog.DiscardHandler), c.now)
	s.sample(context.Background())
	require.Equal(t, 90*time.Second, s.history("a", t0)[0].Oldest)
	require.Equal(t, time.Duration(0), s.history("b", t0)[0].Oldest)
	require.Contains(t, s.charts("a", t0).Depth.Label, "oldest unprocessed up to 1m30s")
}

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(4)
	_, ok := r.last()
	require.False(t, ok)
	for i := range 11 {
		r.push(point{T: t0.Add(time.Duration(i) * time.Second), Backlog: int64(i)})
		require.LessOrEqual(t, r.len(), 4)
	}
	var got []int64
	for _, p := range r.since(time.Time{}) {
		got = append(got, p.Backlog)
	}
	require.Equal(t, []int64{7, 8, 9, 10}, got, "the newest four, oldest first")
	last, _ := r.last()
	require.Equal(t, int64(10), last.Backlog)
	require.Len(t, r.since(t0.Add(9*time.Second)), 2)
}

// TestSamplerBounds: a queue's ring holds an hour of intervals, at most
// maxSlots, and a queue gone for the whole window is forgotten.
func TestSamplerBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		every  time.Duration
		slots  int
		window time.Duration
	}{
		{10 * time.Second, 361, time.Hour},
		{time.Second, maxSlots, time.Hour},
		{100 * time.Millisecond, maxSlots, 6 * time.Minute},
		{2 * time.Hour, 2, time.Hour},
	} {
		s := newSampler(nil, tc.every, slog.New(slog.DiscardHandler), time.Now)
		require.Equal(t, tc.slots, s.slots, tc.every)
		require.Equal(t, tc.window, s.window, tc.every)
	}

	c := &clock{t: t0}
	src := &fakeStats{reads: []read{{parts: []outbox.PartitionStats{part("a", 0, 0, 0), part("b", 0, 0, 0)}}}}
	s := newSampler(src, time.Minute, slog.New(slog.DiscardHandler), c.now)
	for range 3 * 61 {
		s.sample(context.Background())
		c.step(time.Minute)
	}
	require.Equal(t, 61, s.queues["a"].ring.len())
	require.Len(t, s.history("a", c.now()), 60, "the points of the last hour")

	src.reads = append(src.reads, read{parts: []outbox.PartitionStats{part("a", 0, 0, 0)}})
	src.i = len(src.reads) - 1
	for range 60 {
		s.sample(context.Background())
		c.step(time.Minute)
	}
	require.Contains(t, s.queues, "b", "b's last point is an hour old")
	s.sample(context.Background())
	require.NotContains(t, s.queues, "b", "gone for more than the window")
	require.Contains(t, s.queues, "a")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSamplerLoop(t *testing.T) {
	t.Parallel()
	src := &fakeStats{reads: []read{{parts: []outbox.PartitionStats{part("a", 0, 0, 0)}}}}
	s := newSampler(src, time.Second, slog.New(slog.DiscardHandler), time.Now)
	tick := make(chan time.Time)
	var stopped sync.WaitGroup
	stopped.Add(1)
	s.start(tick, stopped.Done)
	waitFor(t, "the first read, at start", func() bool { return s.count() == 1 })
	tick <- time.Now() // unbuffered: taken by the loop
	tick <- time.Now()
	waitFor(t, "a read per tick", func() bool { return s.count() == 3 })
	s.stop()
	stopped.Wait() // the ticker released
	select {
	case <-s.done:
	default:
		t.Fatal("stop returned before the loop ended")
	}
	s.stop() // idempotent
	select {
	case tick <- time.Now():
		t.Fatal("the loop still runs")
	default:
	}
	require.Equal(t, 3, s.count())
}

// TestSamplerStopDuringRead: stop cancels a read under way, which counts
// neither as a sample nor as a failure.
func TestSamplerStopDuringRead(t *testing.T) {
	t.Parallel()
	logs := &dbtest.SyncBuffer{}
	src := &fakeStats{reads: []read{{}}, block: true, entered: make(chan struct{}, 1)}
	s := newSampler(src, time.Second, slog.New(slog.NewTextHandler(logs, nil)), time.Now)
	s.start(make(chan time.Time), func() {})
	<-src.entered
	s.stop()
	require.Equal(t, 0, s.count())
	require.Empty(t, logs.String())
}

func TestDraw(t *testing.T) {
	t.Parallel()
	val := func(p point) (float64, bool) { return float64(p.Backlog), true }
	at := func(min int, v int64, brk bool) point {
		return point{T: t0.Add(time.Duration(min) * time.Minute), Backlog: v, Break: brk}
	}
	c := draw([]point{at(0, 0, true), at(30, 10, false), at(40, 5, true), at(60, 5, true)}, t0, time.Hour, val, formatCount)
	require.Equal(t, "M0.0,45.0L120.0,3.0M160.0,24.0h0M240.0,24.0h0", c.Path)
	require.Equal(t, "5", c.Now)
	require.Equal(t, "10", c.Max)
	c = draw([]point{at(0, 0, true), at(60, 0, false)}, t0, time.Hour, val, formatCount)
	require.Equal(t, "M0.0,45.0L240.0,45.0", c.Path, "all zero: along the bottom")
	c = draw(nil, t0, time.Hour, val, formatCount)
	require.True(t, c.Empty)
	require.Equal(t, "—", c.Now)
}

// TestChartEscapes: a chart's one text, its label, is escaped in the SVG's
// title and aria-label, and its path carries numbers only.
func TestChartEscapes(t *testing.T) {
	t.Parallel()
	admin, err := seqbox.NewAdmin(context.Background(), dbtest.SQLite(t), dbtest.Prefix(t))
	require.NoError(t, err)
	h, err := New(admin, WithLogger(slog.New(slog.DiscardHandler)), WithSampleInterval(time.Hour))
	require.NoError(t, err)
	defer h.Close()
	c := draw([]point{{T: t0, Backlog: 3, Break: true}, {T: t0.Add(time.Minute), Backlog: 4}}, t0, time.Hour, func(p point) (float64, bool) { return float64(p.Backlog), true }, formatCount)
	c.Label = `q</title><script>alert("x")</script>: backlog`
	var b strings.Builder
	require.NoError(t, h.h.tmpl["overview"].ExecuteTemplate(&b, "chart", funcs["chartOf"].(func(string, chart) any)("depth", c)))
	out := b.String()
	require.NotContains(t, out, "<script>")
	require.Contains(t, out, `<title>q&lt;/title&gt;&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;: backlog</title>`)
	require.Contains(t, out, `aria-label="q&lt;/title&gt;&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;: backlog"`)
	require.Contains(t, out, `role="img"`)
	require.Contains(t, out, `d="M0.0,13.5L4.0,3.0"`)
}
