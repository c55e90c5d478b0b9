package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// histogram counts latencies (nanoseconds) in log-linear buckets, as HDR
// histograms do: values below 2^histSubBits exactly, every larger power of
// two split into 2^(histSubBits-1) equal buckets, so a bucket is less than
// 1/128 (0.8%) of its values wide. Its size is fixed whatever the number
// of samples: a soak of hours measures the library's memory, not the
// harness's sample store. Safe for concurrent use (atomic counters).
type histogram struct {
	counts [histBuckets]atomic.Int64
	n      atomic.Int64
	min    atomic.Int64 // valid when n > 0
	max    atomic.Int64
}

const (
	histSubBits = 8
	histHalf    = 1 << (histSubBits - 1)
	// histMaxValue is the largest value kept apart (about 9.8 hours in ns);
	// larger ones land in the last bucket, max still records them exactly.
	histMaxValue = 1<<45 - 1
	histBuckets  = (45-histSubBits)*histHalf + 2*histHalf
)

func newHistogram() *histogram {
	h := &histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

// histBucket is the bucket of v (>= 0).
func histBucket(v int64) int {
	v = min(max(v, 0), histMaxValue)
	if v < 1<<histSubBits {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return shift*histHalf + int(v>>shift)
}

// histBounds is the smallest and largest value of bucket i.
func histBounds(i int) (lo, hi int64) {
	if i < 1<<histSubBits {
		return int64(i), int64(i)
	}
	shift := i/histHalf - 1
	m := int64(i - shift*histHalf)
	return m << shift, (m+1)<<shift - 1
}

// record adds one value; it never allocates.
func (h *histogram) record(v int64) {
	v = max(v, 0)
	h.counts[histBucket(v)].Add(1)
	h.n.Add(1)
	for cur := h.min.Load(); v < cur && !h.min.CompareAndSwap(cur, v); cur = h.min.Load() {
	}
	for cur := h.max.Load(); v > cur && !h.max.CompareAndSwap(cur, v); cur = h.max.Load() {
	}
}

func (h *histogram) count() int64 { return h.n.Load() }

// merge adds every value of o (no longer being recorded into) to h.
func (h *histogram) merge(o *histogram) {
	n := o.n.Load()
	if n == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(n)
	h.min.Store(min(h.min.Load(), o.min.Load()))
	h.max.Store(max(h.max.Load(), o.max.Load()))
}

// percentile is the nearest-rank percentile (0 < p <= 100), like
// percentile on sorted samples, within half a bucket: the middle of the
// bucket holding that rank, kept within the exact min and max. p = 100 is
// the exact max.
func (h *histogram) percentile(p float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	lo, hi := h.min.Load(), h.max.Load()
	if p >= 100 {
		return hi
	}
	rank := min(max(int64(math.Ceil(p/100*float64(n))), 1), n)
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			blo, bhi := histBounds(i)
			return min(max(blo+(bhi-blo)/2, lo), hi)
		}
	}
	return hi // counts still being added by a concurrent record
}

// latency summarises the histogram in milliseconds.
func (h *histogram) latency() LatencyStat {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return LatencyStat{
		P50: ms(h.percentile(50)), P95: ms(h.percentile(95)),
		P99: ms(h.percentile(99)), Max: ms(h.percentile(100)),
		Samples: h.count(),
	}
}
