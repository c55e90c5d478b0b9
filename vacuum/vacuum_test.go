package vacuum

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// fakeDialect holds one partition's outgoing seqs in memory. Methods it
// does not override panic through the nil interface.
type fakeDialect struct {
	dialect.Dialect
	mu        sync.Mutex
	lowest    int64 // smallest seq still stored, 0 when none
	processed int64
	counter   int64
	sweeps    int
	swept     chan int // receives the sweep number as each one lists counters
}

func (f *fakeDialect) Features() dialect.Feature { return dialect.RowLocks }

func (f *fakeDialect) VacuumCounterList(context.Context) ([]dialect.VacuumCounter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	select {
	case f.swept <- f.sweeps:
	default:
	}
	if f.counter == 0 {
		return nil, nil
	}
	return []dialect.VacuumCounter{{PartitionID: 1, Counter: f.counter, ProcessedSeq: f.processed}}, nil
}

func (f *fakeDialect) VacuumLowestSeq(context.Context, int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lowest, nil
}

func (f *fakeDialect) VacuumDelete(_ context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := int(p.ToSeq - p.FromSeq)
	f.lowest = p.ToSeq + 1
	return n, nil
}

func (f *fakeDialect) VacuumCounterSettle(_ context.Context, _ int64, deletedUpTo int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.processed == deletedUpTo {
		f.counter = 0
		return true, nil
	}
	return false, nil
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

// TestBusySweepRepeatsAtOnce: a sweep that found more than a chunk to
// delete in a partition (the vacuum is behind) runs again without waiting
// for the interval; one that kept up waits.
func TestBusySweepRepeatsAtOnce(t *testing.T) {
	t.Parallel()
	f := &fakeDialect{lowest: 1, processed: 25, counter: 25, swept: make(chan int, 10)}
	v, stop := runVacuum(f)

	require.Equal(t, 1, <-f.swept)
	select {
	case n := <-f.swept:
		require.Equal(t, 2, n, "the sweep that was behind (25 to delete, chunk 10) is followed at once by another")
	case <-time.After(10 * time.Second):
		t.Fatal("the second sweep waited for the interval")
	}
	requireNoSweepFor(t, f, 100*time.Millisecond, "the last one found nothing")
	require.NoError(t, stop())
	require.Equal(t, int64(25), v.Deleted())
}

// TestSweepWithinAChunkWaits: a sweep that deletes many rows, but no more
// than a chunk in any partition, keeps to the interval.
func TestSweepWithinAChunkWaits(t *testing.T) {
	t.Parallel()
	f := &fakeDialect{lowest: 1, processed: 10, counter: 10, swept: make(chan int, 10)}
	v, stop := runVacuum(f)

	require.Equal(t, 1, <-f.swept)
	requireNoSweepFor(t, f, 100*time.Millisecond, "the first one kept up")
	require.NoError(t, stop())
	require.Equal(t, int64(10), v.Deleted())
}
