package prioritizer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failureBound caps how long a test waits on a blocking Take. It only turns a
// hang into a failure; no test asserts on how fast anything happens.
const failureBound = 5 * time.Second

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newFakeClockPrioritizer returns a Prioritizer on a fake clock; cfg.Now is
// overwritten.
func newFakeClockPrioritizer(cfg Config) (*Prioritizer, *fakeClock) {
	clock := newFakeClock()
	cfg.Now = clock.Now
	return New(cfg), clock
}

func mustTryTake(t *testing.T, p *Prioritizer) *Claim {
	t.Helper()
	claim := p.TryTake()
	require.NotNil(t, claim, "expected a ready partition")
	return claim
}

// takeOrder drains the ready partitions with TryTake, reporting Done on each
// so that they go idle, and returns the order they were offered in.
func takeOrder(p *Prioritizer) []int64 {
	var order []int64
	for claim := p.TryTake(); claim != nil; claim = p.TryTake() {
		order = append(order, claim.PartitionID())
		claim.Done(1, false)
	}
	return order
}

// waitForBlockedTake waits until some Take is parked waiting for a change, so
// a test can be sure the wake-up path, not the fast path, is exercised.
func waitForBlockedTake(t *testing.T, p *Prioritizer) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.changed != nil
	}, failureBound, time.Millisecond)
}

type takeResult struct {
	claim *Claim
	err   error
}

func takeAsync(ctx context.Context, p *Prioritizer) <-chan takeResult {
	result := make(chan takeResult, 1)
	go func() {
		claim, err := p.Take(ctx)
		result <- takeResult{claim: claim, err: err}
	}()
	return result
}

func TestMarkDirtyThenTake(t *testing.T) {
	t.Parallel()
	p, _ := newFakeClockPrioritizer(Config{})

	p.MarkDirty(7)
	require.Equal(t, Stats{Pending: 1}, p.Stats())

	claim := mustTryTake(t, p)
	require.Equal(t, int64(7), claim.PartitionID())
	require.Equal(t, Stats{Claimed: 1}, p.Stats())

	claim.Done(3, false)
	require.Equal(t, Stats{}, p.Stats(), "a drained partition is forgotten")
	require.Nil(t, p.TryTake())
}

func TestTakeEmptyReturnsNil(t *testing.T) {
	t.Parallel()
	p, _ := newFakeClockPrioritizer(Config{})

	require.Nil(t, p.TryTake())
	require.Equal(t, Stats{}, p.Stats())
}

func TestCoalescedMarkKeepsOlderPriority(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	clock.Advance(time.Millisecond)
	p.MarkDirty(2)
	clock.Advance(time.Millisecond)
	p.MarkDirty(1) // must not move 1 behind 2
	p.MarkMaybeDirty(1)

	require.Equal(t, Stats{Pending: 2}, p.Stats(), "marks coalesce into one entry")
	require.Equal(t, []int64{1, 2}, takeOrder(p))
}

func TestOldestDirtyFirst(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(50)
	clock.Advance(time.Millisecond)
	p.MarkDirty(30)
	clock.Advance(time.Millisecond)
	// Same dirtySince: the lower id wins the tie.
	p.MarkDirty(9)
	p.MarkDirty(4)
	clock.Advance(time.Millisecond)
	p.MarkDirty(1)

	require.Equal(t, []int64{50, 30, 4, 9, 1}, takeOrder(p))
}

func TestHundredPartitionsAllServed(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	const partitions = 100
	var want []int64
	for id := int64(partitions); id >= 1; id-- {
		p.MarkDirty(id)
		want = append(want, id)
		clock.Advance(time.Microsecond)
	}
	for id := int64(1); id <= partitions; id += 2 {
		p.MarkDirty(id) // coalesced, keeps the older position
	}

	require.Equal(t, want, takeOrder(p))
	require.Equal(t, Stats{}, p.Stats())
}

func TestRedirtyWhileClaimedRequeues(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	clock.Advance(time.Millisecond)
	p.MarkDirty(1) // re-dirtied before 2, while claimed
	p.MarkDirty(1)
	clock.Advance(time.Millisecond)
	p.MarkDirty(2)
	require.Equal(t, Stats{Pending: 1, Claimed: 1}, p.Stats())

	clock.Advance(time.Millisecond)
	claim.Done(1, false)

	require.Equal(t, Stats{Pending: 2}, p.Stats(), "the re-dirty was not lost")
	require.Equal(t, []int64{2, 1}, takeOrder(p), "the re-dirtied partition goes to the back of the line")
}

func TestRedirtyWhileClaimedSurvivesOtherWorkersTake(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	workerA := mustTryTake(t, p)
	require.Equal(t, int64(1), workerA.PartitionID())

	p.MarkDirty(1)
	require.Nil(t, p.TryTake(), "worker B must not get a partition worker A holds")

	clock.Advance(time.Millisecond)
	p.MarkDirty(2)
	workerB := mustTryTake(t, p)
	require.Equal(t, int64(2), workerB.PartitionID())
	require.Nil(t, p.TryTake())

	workerA.Done(5, false)
	again := mustTryTake(t, p)
	require.Equal(t, int64(1), again.PartitionID())
}

func TestCoalescedMarkStillWakes(t *testing.T) {
	t.Parallel()

	t.Run("redirtied while claimed", func(t *testing.T) {
		t.Parallel()
		p := New(Config{})
		ctx, cancel := context.WithTimeout(context.Background(), failureBound)
		defer cancel()

		p.MarkDirty(1)
		p.MarkDirty(1)
		holder := mustTryTake(t, p)
		p.MarkDirty(1)
		p.MarkDirty(1)

		result := takeAsync(ctx, p)
		waitForBlockedTake(t, p)
		holder.Done(1, false)

		got := <-result
		require.NoError(t, got.err)
		require.Equal(t, int64(1), got.claim.PartitionID())
	})

	t.Run("pending on a probe delay", func(t *testing.T) {
		t.Parallel()
		// A probe delay far longer than the failure bound: only the marks can
		// make the partition ready in time.
		p := New(Config{ProbeDelayMin: time.Hour, ProbeDelayMax: time.Hour, ProbeWindow: 2 * time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), failureBound)
		defer cancel()

		p.MarkMaybeDirty(1)
		p.MarkMaybeDirty(1)
		mustTryTake(t, p).Done(0, false)
		require.Equal(t, Stats{Delayed: 1}, p.Stats())

		result := takeAsync(ctx, p)
		waitForBlockedTake(t, p)
		p.MarkDirty(1)
		p.MarkDirty(1)

		got := <-result
		require.NoError(t, got.err)
		require.Equal(t, int64(1), got.claim.PartitionID())
	})
}

func TestDroppedClaimRequeues(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	clock.Advance(time.Millisecond)
	p.MarkDirty(2)

	dropped := mustTryTake(t, p)
	require.Equal(t, int64(1), dropped.PartitionID())
	clock.Advance(time.Millisecond)
	func() {
		defer dropped.Release()
		// The worker bails out without reporting an outcome.
	}()
	require.Equal(t, Stats{Pending: 2}, p.Stats())

	retaken := mustTryTake(t, p)
	require.Equal(t, int64(1), retaken.PartitionID(), "original priority kept, ready now")
	retaken.Done(1, false)
	retaken.Release() // no-op after an outcome
	dropped.Release() // no-op: already released

	require.Equal(t, Stats{Pending: 1}, p.Stats())
	require.Equal(t, []int64{2}, takeOrder(p))
}

func TestOnlyFirstOutcomeCounts(t *testing.T) {
	t.Parallel()
	p, _ := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	claim.Done(1, false)
	claim.Failed()
	claim.Skipped()
	claim.Retry()
	claim.Release()
	claim.Done(1, true)

	require.Equal(t, Stats{}, p.Stats())
	require.Nil(t, p.TryTake())
}

func TestSkippedKeepsPriorityAndDelays(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	clock.Advance(time.Millisecond)
	claim.Skipped()
	require.Equal(t, Stats{Delayed: 1}, p.Stats())
	require.Nil(t, p.TryTake())

	clock.Advance(SkipDelayDefault - time.Nanosecond)
	p.MarkDirty(2) // newer than 1
	require.Equal(t, Stats{Pending: 1, Delayed: 1}, p.Stats(), "a mark does not cut a skip delay short")

	clock.Advance(time.Nanosecond)
	require.Equal(t, Stats{Pending: 2}, p.Stats())
	require.Equal(t, []int64{1, 2}, takeOrder(p), "skipping costs no priority")
}

func TestRetryRequeuesImmediately(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	clock.Advance(time.Millisecond)
	p.MarkDirty(2)
	claim.Retry()

	require.Equal(t, Stats{Pending: 2}, p.Stats())
	require.Equal(t, []int64{1, 2}, takeOrder(p))
}

func TestFailedBacksOffExponentially(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	wantDelays := []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond,
		6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond,
		30 * time.Second, 30 * time.Second, 30 * time.Second,
	}
	for attempt, wantDelay := range wantDelays {
		claim := mustTryTake(t, p)
		require.Equal(t, int64(1), claim.PartitionID())
		claim.Failed()

		if attempt == 0 {
			p.MarkDirty(2) // newer, but healthy
			healthy := mustTryTake(t, p)
			require.Equal(t, int64(2), healthy.PartitionID(), "a healthy partition goes before a deferred one")
			healthy.Done(1, false)
		}

		clock.Advance(wantDelay - time.Nanosecond)
		require.Nil(t, p.TryTake(), "attempt %d: ready before its %v backoff", attempt+1, wantDelay)
		clock.Advance(time.Nanosecond)
	}
	require.Equal(t, int64(1), mustTryTake(t, p).PartitionID())
}

func TestErrorBackoffIsOverflowSafe(t *testing.T) {
	t.Parallel()

	require.Equal(t, 100*time.Millisecond, errorBackoff(1, 100*time.Millisecond, 30*time.Second))
	require.Equal(t, 30*time.Second, errorBackoff(1_000_000, 100*time.Millisecond, 30*time.Second))
	require.Equal(t, maxDuration, errorBackoff(200, time.Nanosecond, maxDuration))
	require.Equal(t, time.Duration(1<<62), errorBackoff(63, time.Nanosecond, maxDuration))
	require.Equal(t, 30*time.Second, errorBackoff(1, time.Minute, 30*time.Second), "base above max is capped")
}

func TestDoneClearsErrorState(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	for _, delay := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		mustTryTake(t, p).Failed()
		clock.Advance(delay)
	}

	claim := mustTryTake(t, p)
	p.MarkDirty(1) // keep it pending after Done
	claim.Done(1, false)

	mustTryTake(t, p).Failed()
	clock.Advance(ErrorBackoffBaseDefault - time.Nanosecond)
	require.Nil(t, p.TryTake())
	clock.Advance(time.Nanosecond)
	require.NotNil(t, p.TryTake(), "the backoff restarted from the base")
}

func TestErrorCooldownPreservedDespiteMark(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	mustTryTake(t, p).Failed()

	p.MarkDirty(1)
	p.MarkMaybeDirty(1)
	p.Flush()
	require.Equal(t, Stats{Delayed: 1}, p.Stats())
	require.Nil(t, p.TryTake())

	clock.Advance(ErrorBackoffBaseDefault)
	require.Equal(t, int64(1), mustTryTake(t, p).PartitionID())
}

func TestSaturatedGoesToBackOfLine(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	clock.Advance(time.Millisecond)
	p.MarkDirty(2) // dirtied after 1
	clock.Advance(time.Millisecond)
	claim.Done(500, true)

	require.Equal(t, Stats{Pending: 2}, p.Stats(), "a saturated partition stays pending")
	require.Equal(t, []int64{2, 1}, takeOrder(p))
}

func TestMaybeDirtyProbesUntilWindowEnds(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	start := clock.Now()
	p.MarkMaybeDirty(1)
	require.Equal(t, Stats{Pending: 1}, p.Stats(), "a maybe-dirty partition is checked at once")

	var delays []time.Duration
	delay := ProbeDelayMinDefault
	for {
		claim := mustTryTake(t, p)
		probedAt := clock.Now()
		claim.Done(0, false)
		if probedAt.Sub(start) >= ProbeWindowDefault {
			break
		}
		require.Equal(t, Stats{Delayed: 1}, p.Stats())
		clock.Advance(delay - time.Nanosecond)
		require.Nil(t, p.TryTake(), "re-offered before its %v probe delay", delay)
		clock.Advance(time.Nanosecond)
		delays = append(delays, delay)
		delay = min(delay*2, ProbeDelayMaxDefault)
	}

	require.Equal(t, Stats{}, p.Stats(), "an empty probe after the window goes idle")
	require.Equal(t, []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
		16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 100 * time.Millisecond,
	}, delays[:8])
	require.Equal(t, ProbeDelayMaxDefault, delays[len(delays)-1])
}

func TestProbeDelayResetsWhenRowsMoved(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkMaybeDirty(1)
	for _, delay := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		mustTryTake(t, p).Done(0, false)
		clock.Advance(delay)
	}
	mustTryTake(t, p).Done(3, false)

	clock.Advance(ProbeDelayMinDefault - time.Nanosecond)
	require.Nil(t, p.TryTake())
	clock.Advance(time.Nanosecond)
	require.NotNil(t, p.TryTake(), "moving rows resets the probe delay")
}

func TestMarkDirtyCutsProbeDelayShort(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkMaybeDirty(1)
	mustTryTake(t, p).Done(0, false)
	p.MarkDirty(2) // dirtied before 1 is marked again
	clock.Advance(time.Microsecond)
	require.Equal(t, Stats{Pending: 1, Delayed: 1}, p.Stats())

	p.MarkDirty(1)
	require.Equal(t, Stats{Pending: 2}, p.Stats())
	require.Equal(t, []int64{2, 1}, takeOrder(p))
}

func TestMaybeDirtyWhileClaimedRequeues(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkDirty(1)
	claim := mustTryTake(t, p)
	p.MarkMaybeDirty(1)
	claim.Done(1, false)
	require.Equal(t, Stats{Pending: 1}, p.Stats())

	// The probe window it opened outlives the re-dirty.
	mustTryTake(t, p).Done(0, false)
	require.Equal(t, Stats{Delayed: 1}, p.Stats())
	clock.Advance(ProbeWindowDefault)
	mustTryTake(t, p).Done(0, false)
	require.Equal(t, Stats{}, p.Stats())
}

func TestFlushPromotesProbingPartitions(t *testing.T) {
	t.Parallel()
	p, clock := newFakeClockPrioritizer(Config{})

	p.MarkMaybeDirty(1)
	p.MarkDirty(2)
	p.MarkDirty(3)
	mustTryTake(t, p).Done(0, false) // 1: probing
	mustTryTake(t, p).Failed()       // 2: error backoff
	mustTryTake(t, p).Skipped()      // 3: skip delay
	clock.Advance(time.Microsecond)
	require.Equal(t, Stats{Delayed: 3}, p.Stats())

	p.Flush()

	require.Equal(t, Stats{Pending: 1, Delayed: 2}, p.Stats())
	require.Equal(t, int64(1), mustTryTake(t, p).PartitionID())
	require.Nil(t, p.TryTake())
}

func TestConcurrentTakeNeverDoubleClaims(t *testing.T) {
	t.Parallel()
	p := New(Config{ErrorBackoffBase: 50 * time.Microsecond, ErrorBackoffMax: time.Millisecond, SkipDelay: 50 * time.Microsecond})

	const (
		partitions    = 32
		workers       = 8
		claimsToServe = 4000
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var (
		inFlight     [partitions]atomic.Bool
		doubleClaims atomic.Int64
		served       atomic.Int64
		wg           sync.WaitGroup
	)
	for id := range int64(partitions) {
		p.MarkDirty(id)
	}
	// The producer runs until the workers are done so that work never dries
	// up; the workers' claim count is what bounds the test.
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			id := rand.Int64N(partitions)
			if i%3 == 0 {
				p.MarkMaybeDirty(id)
			} else {
				p.MarkDirty(id)
			}
			if i%64 == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
	})
	for range workers {
		wg.Go(func() {
			for served.Load() < claimsToServe {
				claim, err := p.Take(ctx)
				if err != nil {
					return
				}
				id := claim.PartitionID()
				if !inFlight[id].CompareAndSwap(false, true) {
					doubleClaims.Add(1)
				}
				served.Add(1)
				// Clear the flag before reporting: the outcome makes the
				// partition takeable by others at once.
				inFlight[id].Store(false)
				switch rand.IntN(6) {
				case 0:
					claim.Done(1, true) // keeps the partition busy
				case 1:
					claim.Done(rand.IntN(2), false)
				case 2:
					claim.Retry()
				case 3:
					claim.Skipped()
				case 4:
					claim.Failed()
				default:
					claim.Release()
				}
				claim.Release()
			}
			// Enough served: unblock the other workers.
			cancel()
		})
	}
	wg.Wait()

	require.Zero(t, doubleClaims.Load(), "a partition was claimed by two workers at once")
	require.GreaterOrEqual(t, served.Load(), int64(claimsToServe), "workers stopped early (failure bound hit?)")
	require.Zero(t, p.Stats().Claimed, "every claim was ended")
}

func TestTakeReturnsOnContextCancel(t *testing.T) {
	t.Parallel()
	p := New(Config{})

	ctx, cancel := context.WithCancel(context.Background())
	result := takeAsync(ctx, p)
	waitForBlockedTake(t, p)
	cancel()

	select {
	case got := <-result:
		require.ErrorIs(t, got.err, context.Canceled)
		require.Nil(t, got.claim)
	case <-time.After(failureBound):
		t.Fatal("Take did not return after its context was canceled")
	}
}

func TestTakeWithDoneContextLeavesWorkPending(t *testing.T) {
	t.Parallel()
	p := New(Config{})
	p.MarkDirty(1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	claim, err := p.Take(ctx)

	require.True(t, errors.Is(err, context.Canceled))
	require.Nil(t, claim)
	require.Equal(t, Stats{Pending: 1}, p.Stats())
}

func TestDelayedEntryWakesBlockedTake(t *testing.T) {
	t.Parallel()
	const backoff = 5 * time.Millisecond
	p := New(Config{ErrorBackoffBase: backoff})
	ctx, cancel := context.WithTimeout(context.Background(), failureBound)
	defer cancel()

	p.MarkDirty(1)
	failedAt := time.Now()
	mustTryTake(t, p).Failed()

	claim, err := p.Take(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), claim.PartitionID())
	require.GreaterOrEqual(t, time.Since(failedAt), backoff, "offered before its backoff ended")
}

func TestDelayedEntryAddedWhileWaitingWakesBlockedTake(t *testing.T) {
	t.Parallel()
	p := New(Config{ErrorBackoffBase: time.Hour, SkipDelay: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), failureBound)
	defer cancel()

	// The waiter first sees only an entry due in an hour; a skip due much
	// sooner must re-arm its timer.
	p.MarkDirty(1)
	mustTryTake(t, p).Failed()
	p.MarkDirty(2)
	skipped := mustTryTake(t, p)

	result := takeAsync(ctx, p)
	waitForBlockedTake(t, p)
	skipped.Skipped()

	got := <-result
	require.NoError(t, got.err)
	require.Equal(t, int64(2), got.claim.PartitionID())
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()

	defaults := Config{}.WithDefaults()
	require.Equal(t, ErrorBackoffBaseDefault, defaults.ErrorBackoffBase)
	require.Equal(t, ErrorBackoffMaxDefault, defaults.ErrorBackoffMax)
	require.Equal(t, SkipDelayDefault, defaults.SkipDelay)
	require.Equal(t, ProbeWindowDefault, defaults.ProbeWindow)
	require.Equal(t, ProbeDelayMinDefault, defaults.ProbeDelayMin)
	require.Equal(t, ProbeDelayMaxDefault, defaults.ProbeDelayMax)
	require.NotNil(t, defaults.Now)

	require.Equal(t, 100*time.Millisecond, ErrorBackoffBaseDefault)
	require.Equal(t, 30*time.Second, ErrorBackoffMaxDefault)
	require.Equal(t, 2*time.Millisecond, SkipDelayDefault)
	require.Equal(t, time.Second, ProbeWindowDefault)
	require.Equal(t, time.Millisecond, ProbeDelayMinDefault)
	require.Equal(t, 100*time.Millisecond, ProbeDelayMaxDefault)

	clock := newFakeClock()
	custom := Config{
		ErrorBackoffBase: 1, ErrorBackoffMax: 2, SkipDelay: 3,
		ProbeWindow: 4, ProbeDelayMin: 5, ProbeDelayMax: 6, Now: clock.Now,
	}.WithDefaults()
	require.Equal(t, time.Duration(1), custom.ErrorBackoffBase)
	require.Equal(t, time.Duration(2), custom.ErrorBackoffMax)
	require.Equal(t, time.Duration(3), custom.SkipDelay)
	require.Equal(t, time.Duration(4), custom.ProbeWindow)
	require.Equal(t, time.Duration(5), custom.ProbeDelayMin)
	require.Equal(t, time.Duration(6), custom.ProbeDelayMax)
	require.Equal(t, clock.Now(), custom.Now())

	negative := Config{SkipDelay: -time.Second}.WithDefaults()
	require.Equal(t, SkipDelayDefault, negative.SkipDelay)
}
