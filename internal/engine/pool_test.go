package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/processor"
)

// startFake answers the pool's first poll when the test says so and
// records which partitions were leased; every partition is empty.
type startFake struct {
	baseFake
	polled chan struct{}  // closed when the first poll begins
	answer chan pollReply // the test's answer to it
	once   sync.Once

	mu     sync.Mutex
	leased map[int64]int
	lease  chan int64 // every lease, as it happens
}

type pollReply struct {
	ids []int64
	err error
}

func newStartFake() *startFake {
	return &startFake{polled: make(chan struct{}), answer: make(chan pollReply, 1),
		leased: map[int64]int{}, lease: make(chan int64, 64)}
}

func (f *startFake) ProcessorReadyList(ctx context.Context, _ *dialect.ProcessorReadyListParams) ([]int64, error) {
	f.once.Do(func() { close(f.polled) })
	select {
	case r := <-f.answer:
		return r.ids, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *startFake) ProcessorLease(_ context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	f.mu.Lock()
	f.leased[p.PartitionID]++
	f.mu.Unlock()
	f.lease <- p.PartitionID
	return dialect.ProcessorLeaseResult{}, nil // empty
}

func (f *startFake) leases() map[int64]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int64]int, len(f.leased))
	for k, v := range f.leased {
		out[k] = v
	}
	return out
}

// runPool starts p and returns a function that stops it and waits for Run.
func runPool(t *testing.T, p *Pool) (stop func()) {
	t.Helper()
	stopping := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), stopping) }()
	return func() {
		close(stopping)
		require.NoError(t, <-done)
	}
}

func startPool(f *startFake) *Pool {
	h := processor.Leased(func(context.Context, processor.Delivery) error { return nil })
	return NewPool(f, PoolConfig{Owner: "me", PollInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		[]QueueSpec{testSpec("q", h, []int64{1, 2, 3})})
}

// TestStartWakesOnlyReadyPartitions: a starting pool reads which partitions
// have work and leases only those. It once woke every task, one lease
// attempt per partition at once, queued ahead of the first new messages.
func TestStartWakesOnlyReadyPartitions(t *testing.T) {
	f := newStartFake()
	stop := runPool(t, startPool(f))
	select {
	case <-f.polled:
	case <-time.After(time.Minute):
		t.Fatal("the pool did not read its ready partitions at start")
	}
	require.Empty(t, f.leases(), "no task may be woken before the ready partitions are read")
	f.answer <- pollReply{ids: []int64{2}}
	require.Equal(t, int64(2), <-f.lease)
	stop()
	require.Equal(t, map[int64]int{2: 1}, f.leases())
}

// TestStartWakesEveryPartitionWhenThePollFails: without the list, every
// task looks for its own work, as before the first poll existed.
func TestStartWakesEveryPartitionWhenThePollFails(t *testing.T) {
	f := newStartFake()
	f.answer <- pollReply{err: errors.New("connection refused")}
	stop := runPool(t, startPool(f))
	seen := map[int64]bool{}
	for len(seen) < 3 {
		seen[<-f.lease] = true
	}
	stop()
	require.Equal(t, map[int64]bool{1: true, 2: true, 3: true}, seen)
}
