package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// groupHarness is a coalescer over ints whose group call blocks until
// released, so that a test can line requests up behind it.
type groupHarness struct {
	c                *coalescer[int, int]
	ones, manys      atomic.Int32
	sizes            chan int
	block            chan struct{}
	failMany, panics bool
}

const (
	timeout = 5 * time.Second
	tick    = time.Millisecond
)

func newGroupHarness() *groupHarness {
	h := &groupHarness{sizes: make(chan int, 100), block: make(chan struct{})}
	h.c = &coalescer[int, int]{
		one: func(_ context.Context, req int) (int, error) {
			h.ones.Add(1)
			<-h.block
			return req * 10, nil
		},
		many: func(_ context.Context, reqs []int) ([]dialect.ProcessorGroupResult, error) {
			h.manys.Add(1)
			h.sizes <- len(reqs)
			if h.panics {
				panic("boom")
			}
			if h.failMany {
				return nil, errors.New("group refused")
			}
			out := make([]dialect.ProcessorGroupResult, len(reqs))
			for i, r := range reqs {
				out[i].Lease.State.ProcessedSeq = int64(r * 10)
				if r == 3 {
					out[i].Err = dialect.ErrLeaseLost
				}
			}
			return out, nil
		},
		result: func(r dialect.ProcessorGroupResult) int { return int(r.Lease.State.ProcessedSeq) },
	}
	return h
}

// lineUp starts a lone leader (blocked in one), then n more requests, and
// waits until all of them are queued behind it.
func (h *groupHarness) lineUp(t *testing.T, reqs ...int) (results map[int]int, errs map[int]error, wait func()) {
	results, errs = map[int]int{}, map[int]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(r int) {
		defer wg.Done()
		v, err := h.c.runAlone(context.Background(), r)
		mu.Lock()
		results[r], errs[r] = v, err
		mu.Unlock()
	}
	wg.Add(1)
	go run(0)
	require.Eventually(t, func() bool { return h.ones.Load() == 1 }, timeout, tick)
	for _, r := range reqs {
		wg.Add(1)
		go run(r)
	}
	require.Eventually(t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return len(h.c.queue) == len(reqs)
	}, timeout, tick)
	return results, errs, wg.Wait
}

func TestCoalescerGroupsWhatArrivesMeanwhile(t *testing.T) {
	h := newGroupHarness()
	results, errs, wait := h.lineUp(t, 1, 2, 3)
	close(h.block)
	wait()
	require.Equal(t, int32(1), h.ones.Load(), "the lone first request ran alone")
	require.Equal(t, int32(1), h.manys.Load(), "the three behind it ran as one group")
	require.Equal(t, 3, <-h.sizes)
	require.Equal(t, map[int]int{0: 0, 1: 10, 2: 20, 3: 30}, results)
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[3], dialect.ErrLeaseLost, "an item's own error reaches only its caller")
	require.False(t, h.c.running, "idle again")
}

func TestCoalescerFailedGroupRunsEachAlone(t *testing.T) {
	for _, panics := range []bool{false, true} {
		h := newGroupHarness()
		h.failMany, h.panics = !panics, panics
		results, errs, wait := h.lineUp(t, 1, 2)
		close(h.block)
		wait()
		require.Equal(t, int32(3), h.ones.Load(), "the leader, then each item of the failed group alone")
		require.Equal(t, map[int]int{0: 0, 1: 10, 2: 20}, results)
		require.NoError(t, errs[1])
		require.NoError(t, errs[2])
	}
}
