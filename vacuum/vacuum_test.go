package vacuum

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// fakeDialect is a Store holding one partition's outgoing seqs in memory.
type fakeDialect struct {
	mu        sync.Mutex
	pruned    int64 // every seq at or below is deleted
	processed int64
	sweeps    int
	swept     chan int // receives the sweep number as each one lists counters
	keys      int      // expired dedup keys left
}

func (f *fakeDialect) DedupExpire(_ context.Context, p *dialect.DedupExpireParams) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(f.keys, p.Limit)
	f.keys -= n
	return n, nil
}

func (f *fakeDialect) Tuning() dialect.Tuning { return dialect.Tuning{VacuumWorkers: 4} }

func (f *fakeDialect) VacuumCounterList(context.Context, *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	select {
	case f.swept <- f.sweeps:
	default:
	}
	if f.processed <= f.pruned {
		return nil, nil
	}
	return []dialect.VacuumCounter{{PartitionID: 1, PrunedSeq: f.pruned, ProcessedSeq: f.processed}}, nil
}

func (f *fakeDialect) VacuumDelete(_ context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range p.Ranges {
		if r.FromSeq != f.pruned {
			return 0, fmt.Errorf("delete from %d, pruned is %d: a gap or a rescan", r.FromSeq, f.pruned)
		}
		f.pruned = max(f.pruned, r.ToSeq)
		n += int(r.ToSeq - r.FromSeq)
	}
	return n, nil
}

// runVacuum runs a vacuum over f with chunk 10 and a one-hour interval
// until the returned stop is called; stop reports Run's result.
func runVacuum(f *fakeDialect) (*Vacuum, func() error) {
	v := New(f, Config{Interval: time.Hour, Chunk: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stopping := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- v.Run(context.Background(), stopping) }()
	return v, func() error { close(stopping); return <-done }
}

// requireNoSweepFor fails if another sweep starts within d.
func requireNoSweepFor(t *testing.T, f *fakeDialect, d time.Duration, why string) {
	t.Helper()
	select {
	case n := <-f.swept:
		t.Fatalf("sweep %d ran at once although %s: it must wait the interval", n, why)
	case <-time.After(d):
	}
}

// TestBusySweepRepeatsAtOnce: a sweep that left a partition with more than
// a chunk to delete (the vacuum is behind) is followed by another without
// waiting for the interval; one that kept up waits.
func TestBusySweepRepeatsAtOnce(t *testing.T) {
	t.Parallel()
	f := &fakeDialect{processed: 25, swept: make(chan int, 10)}
	v, stop := runVacuum(f)

	require.Equal(t, 1, <-f.swept)
	for want := 2; want <= 3; want++ { // 25 to delete, 10 per sweep
		select {
		case n := <-f.swept:
			require.Equal(t, want, n, "a sweep that was behind is followed at once by another")
		case <-time.After(10 * time.Second):
			t.Fatalf("sweep %d waited for the interval", want)
		}
	}
	requireNoSweepFor(t, f, 100*time.Millisecond, "the last one kept up")
	require.NoError(t, stop())
	require.Equal(t, int64(25), v.Deleted())
}

// TestSweepWithinAChunkWaits: a sweep that deletes many rows, but no more
// than a chunk in any partition, keeps to the interval.
func TestSweepWithinAChunkWaits(t *testing.T) {
	t.Parallel()
	f := &fakeDialect{processed: 10, swept: make(chan int, 10)}
	v, stop := runVacuum(f)

	require.Equal(t, 1, <-f.swept)
	requireNoSweepFor(t, f, 100*time.Millisecond, "the first one kept up")
	require.NoError(t, stop())
	require.Equal(t, int64(10), v.Deleted())
}

// TestBatches: partitions share transactions up to a chunk of messages;
// each partition appears at most once per sweep, with at most a chunk.
func TestBatches(t *testing.T) {
	t.Parallel()
	got := batches([]dialect.VacuumCounter{
		{PartitionID: 1, PrunedSeq: 0, ProcessedSeq: 3},
		{PartitionID: 2, PrunedSeq: 10, ProcessedSeq: 14},
		{PartitionID: 3, PrunedSeq: 5, ProcessedSeq: 5},  // nothing to prune
		{PartitionID: 4, PrunedSeq: 0, ProcessedSeq: 25}, // behind: one chunk now
		{PartitionID: 5, PrunedSeq: 7, ProcessedSeq: 9},
	}, 10)
	require.Equal(t, [][]dialect.VacuumRange{
		{{PartitionID: 1, FromSeq: 0, ToSeq: 3}, {PartitionID: 2, FromSeq: 10, ToSeq: 14}},
		{{PartitionID: 4, FromSeq: 0, ToSeq: 10}},
		{{PartitionID: 5, FromSeq: 7, ToSeq: 9}},
	}, got)
	require.Empty(t, batches(nil, 10))
}

// Expired dedup keys go a chunk per sweep, and a full chunk makes the next
// sweep start at once: 25 keys with chunk 10 are gone without waiting for
// the (one-hour) interval.
func TestSweepExpiresDedupKeysInChunks(t *testing.T) {
	f := &fakeDialect{keys: 25, swept: make(chan int, 16)}
	v, stop := runVacuum(f)
	require.Eventually(t, func() bool { return v.ExpiredKeys() == 25 }, 10*time.Second, time.Millisecond)
	require.NoError(t, stop())
}

// fakeRotator is a Store that rotates: it counts rounds and reports each
// round's params.
type fakeRotator struct {
	*fakeDialect
	rounds chan *dialect.TableRotateParams
}

func (f *fakeRotator) TableRotate(_ context.Context, p *dialect.TableRotateParams) (dialect.TableRotateResult, error) {
	f.rounds <- p
	return dialect.TableRotateResult{Turn: true, Truncated: []int{1}}, nil
}

// TestRotateRounds: a store that rotates gets a round every quarter of the
// rotation interval (at most the vacuum interval), with a hold of the prune
// longer than several rounds, and each truncation is counted; a negative
// interval runs no round.
func TestRotateRounds(t *testing.T) {
	t.Parallel()
	f := &fakeRotator{fakeDialect: &fakeDialect{swept: make(chan int, 1)}, rounds: make(chan *dialect.TableRotateParams)}
	v := New(f, Config{Interval: time.Hour, RotateInterval: 40 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stopping := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- v.Run(context.Background(), stopping) }()
	for range 3 {
		p := <-f.rounds
		require.Equal(t, 40*time.Millisecond, p.Interval)
		require.Equal(t, int64(RotateSizeDefault), p.Size)
		require.Equal(t, RotateLockTimeoutDefault, p.LockTimeout)
		require.Greater(t, p.Hold, 5*10*time.Millisecond, "the hold outlasts several rounds")
	}
	close(stopping)
	go func() {
		for range f.rounds { // a round in flight when Run stops
		}
	}()
	require.NoError(t, <-done)
	close(f.rounds) // Run has returned: no round sends any more
	require.GreaterOrEqual(t, v.Truncated(), int64(3))

	off := &fakeRotator{fakeDialect: &fakeDialect{swept: make(chan int, 1)}, rounds: make(chan *dialect.TableRotateParams, 1)}
	v = New(off, Config{Interval: time.Hour, RotateInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stopping = make(chan struct{})
	go func() { done <- v.Run(context.Background(), stopping) }()
	<-off.swept // the first sweep ran: Run is under way
	close(stopping)
	require.NoError(t, <-done)
	require.Empty(t, off.rounds, "rotation off: no round")
}

// TestRotateFirstRoundAtOnce: the first round runs when Run starts, not a
// round later, so a new schema's prune is held from the start. The round
// here is an hour: waiting for it would fail the test's deadline.
func TestRotateFirstRoundAtOnce(t *testing.T) {
	t.Parallel()
	f := &fakeRotator{fakeDialect: &fakeDialect{swept: make(chan int, 1)}, rounds: make(chan *dialect.TableRotateParams, 1)}
	v := New(f, Config{Interval: time.Hour, RotateInterval: 4 * time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stopping := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- v.Run(context.Background(), stopping) }()
	select {
	case <-f.rounds:
	case <-time.After(time.Minute):
		t.Fatal("no rotation round within a minute of Run; the first waits for the round interval (1h)")
	}
	close(stopping)
	require.NoError(t, <-done)
}

func TestValidateRotation(t *testing.T) {
	t.Parallel()
	ok := Config{RotateInterval: -1, RotateSize: -1}.WithDefaults()
	require.Empty(t, ok.Validate())
	bad := Config{RotateInterval: time.Millisecond, RotateSize: 1024}.WithDefaults()
	errs := bad.Validate()
	require.Len(t, errs, 2)
	require.ErrorContains(t, errs[0], "RotateInterval")
	require.ErrorContains(t, errs[1], "RotateSize")
}
