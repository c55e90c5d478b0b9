// Package vacuum prunes processed rows. Every ack bumps its partition's
// vacuum counter; a sweep visits only partitions whose counter is above
// zero, deletes outgoing and body rows at or below the cursor in chunks (one
// transaction each), then clears the counter if the cursor has not moved
// past what it deleted, so acks that landed during the sweep are kept for
// the next one. Sweeps of several processes may overlap safely.
package vacuum

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// Defaults.
const (
	IntervalDefault = time.Second
	ChunkDefault    = 5000
)

// Config tunes the vacuum.
type Config struct {
	// Interval between sweeps. Defaults to 1s.
	Interval time.Duration
	// Chunk is the most messages deleted per transaction. Defaults to 5000.
	Chunk  int
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.Chunk = cmp.Or(c.Chunk, ChunkDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if c.Interval <= 0 {
		return errors.New("vacuum interval must be > 0")
	}
	if c.Chunk < 1 || c.Chunk > 100000 {
		return errors.New("vacuum chunk must be 1..100000")
	}
	return nil
}

// Vacuum is the pruning task.
type Vacuum struct {
	d       dialect.Dialect
	cfg     Config
	log     *slog.Logger
	workers int
	deleted atomic.Int64
}

// New builds a vacuum; cfg must be validated.
func New(d dialect.Dialect, cfg Config) *Vacuum {
	cfg = cfg.WithDefaults()
	// Partitions are swept in parallel: on a busy server one sweeping
	// connection gets too small a share to keep up with the acks (MariaDB,
	// 2 cores, 31k msgs/s: 550k processed rows left after a minute). One
	// writer gains nothing from more.
	workers := sweepWorkers
	if d.Features().Has(dialect.SingleWriter) {
		workers = 1
	}
	return &Vacuum{d: d, cfg: cfg, log: cfg.Logger.With("component", "vacuum"), workers: workers}
}

// sweepWorkers is how many partitions a sweep prunes at once.
const sweepWorkers = 4

// Deleted is the number of messages this process has pruned.
func (v *Vacuum) Deleted() int64 { return v.deleted.Load() }

// Run sweeps every Interval until stopping closes or ctx ends.
func (v *Vacuum) Run(ctx context.Context, stopping <-chan struct{}) error {
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	failures := 0
	for {
		delay := v.cfg.Interval
		behind := false
		err := lifecycle.Safely(func() (err error) { _, behind, err = v.sweep(waitCtx); return err })
		switch {
		case err == nil:
			failures = 0
			if behind {
				// Acks outpace one sweep per interval: waiting would let
				// processed rows pile up (measured on MariaDB under full
				// load: 800k rows left after a minute). Sweeping at once
				// whenever a sweep was merely large costs SQLite's single
				// writer a quarter of its sustained throughput.
				delay = 0
			}
		case waitCtx.Err() != nil:
			return nil
		default:
			failures++
			delay = max(delay, lifecycle.Backoff(failures, 500*time.Millisecond, time.Minute))
			lifecycle.LogPanic(v.log, "vacuum sweep failed", err)
		}
		if delay == 0 {
			if waitCtx.Err() != nil {
				return nil
			}
			continue
		}
		if !lifecycle.Sleep(waitCtx, delay) {
			return nil
		}
	}
}

// Sweep prunes every partition with a positive counter once and returns
// how many messages it deleted.
func (v *Vacuum) Sweep(ctx context.Context) (int, error) {
	total, _, err := v.sweep(ctx)
	return total, err
}

// sweep is Sweep, also reporting whether some partition had more than a
// chunk to delete: the vacuum is behind.
func (v *Vacuum) sweep(ctx context.Context) (total int, behind bool, err error) {
	counters, err := v.d.VacuumCounterList(ctx)
	if err != nil {
		return 0, false, err
	}
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(v.workers)
	for _, c := range counters {
		g.Go(func() error {
			n, err := v.sweepPartition(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			total += n
			behind = behind || n > v.cfg.Chunk
			if err != nil && ctx.Err() == nil {
				// One broken partition must not stop the others.
				errs = append(errs, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil {
		return total, behind, ctx.Err()
	}
	return total, behind, errors.Join(errs...)
}

func (v *Vacuum) sweepPartition(ctx context.Context, c dialect.VacuumCounter) (int, error) {
	lowest, err := v.d.VacuumLowestSeq(ctx, c.PartitionID)
	if err != nil {
		return 0, err
	}
	total := 0
	if lowest > 0 && lowest <= c.ProcessedSeq {
		// Seqs are gap-free, so a seq range of Chunk is exactly Chunk rows.
		for from := lowest - 1; from < c.ProcessedSeq; {
			to := min(from+int64(v.cfg.Chunk), c.ProcessedSeq)
			n, err := v.d.VacuumDelete(ctx, &dialect.VacuumDeleteParams{PartitionID: c.PartitionID, FromSeq: from, ToSeq: to})
			if err != nil {
				// Leave the counter: the rows left behind are found next time.
				return total, err
			}
			total += n
			v.deleted.Add(int64(n))
			from = to
		}
	}
	_, err = v.d.VacuumCounterSettle(ctx, c.PartitionID, c.ProcessedSeq)
	return total, err
}
