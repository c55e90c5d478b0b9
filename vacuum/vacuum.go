// Package vacuum prunes processed rows. Each partition records how far it
// is pruned (vacuum_counter.pruned_seq); a sweep visits the partitions whose
// cursor is past that, deletes outgoing and body rows up to the cursor in
// chunks (one transaction each, recording the new pruned seq with the
// delete), and never reads what it pruned before. Acks do not touch the
// row. Sweeps of several processes may overlap safely: deletes are
// idempotent and pruned_seq only grows.
//
// Applications do not use this package directly: it exports only what
// seqbox's engine wires together (docs/ARCHITECTURE.md, "The public
// surface"), and its API carries no compatibility promise; it may change
// in any release.
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

	"github.com/seqbox/seqbox/internal/configerr"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// Defaults.
const (
	IntervalDefault      = time.Second
	ChunkDefault         = 5000
	TableIntervalDefault = 30 * time.Second
	// RotateIntervalDefault is the interval measured in docs/ROTATION.md
	// ("Measured"): at full rate, a truncation every 30 s pauses the
	// pipeline for about a quarter of a second.
	RotateIntervalDefault    = 30 * time.Second
	RotateSizeDefault        = 256 << 20
	RotateLockTimeoutDefault = 100 * time.Millisecond
)

// Bounds of the rotation settings.
const (
	rotateIntervalMin = 10 * time.Millisecond
	rotateSizeMin     = 1 << 20
)

// Config tunes the vacuum.
type Config struct {
	// Interval between sweeps. Defaults to 1s.
	Interval time.Duration
	// Chunk is the most messages deleted per transaction. Defaults to 5000.
	Chunk int
	// TableInterval is how often the tables themselves are vacuumed where
	// the database needs seqbox to (PostgreSQL with autovacuum off; see
	// TableVacuumer). Defaults to 30s; negative disables it.
	TableInterval time.Duration
	// RotateInterval switches the current generation of body and outgoing
	// once it is older than this, where the store rotates them (see
	// Rotator; docs/ROTATION.md). Negative (the default) disables rotation
	// in this process, which then prunes row by row.
	RotateInterval time.Duration
	// RotateSize switches the current generation once its tables take more
	// than this many bytes. Defaults to 256 MiB; negative: never by size.
	RotateSize int64
	// RotateLockTimeout bounds the wait for a generation's tables before
	// truncating them. Defaults to 100ms; not a Builder setting (while the
	// rotator waits, every statement that reads the tables waits behind it).
	RotateLockTimeout time.Duration
	Logger            *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.Chunk = cmp.Or(c.Chunk, ChunkDefault)
	c.TableInterval = cmp.Or(c.TableInterval, TableIntervalDefault)
	c.RotateInterval = cmp.Or(c.RotateInterval, RotateIntervalDefault)
	c.RotateSize = cmp.Or(c.RotateSize, RotateSizeDefault)
	c.RotateLockTimeout = cmp.Or(c.RotateLockTimeout, RotateLockTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every setting that cannot work, named as the Builder
// takes it.
func (c Config) Validate() []error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, configerr.New("VacuumInterval", "%v: must be > 0", c.Interval))
	}
	if c.Chunk < 1 || c.Chunk > 100000 {
		errs = append(errs, configerr.New("VacuumChunk", "%d: must be 1..100000", c.Chunk))
	}
	if c.RotateInterval > 0 && c.RotateInterval < rotateIntervalMin {
		errs = append(errs, configerr.New("RotateInterval", "%v: must be at least %v, or negative for never", c.RotateInterval, rotateIntervalMin))
	}
	if c.RotateSize > 0 && c.RotateSize < rotateSizeMin {
		errs = append(errs, configerr.New("RotateSize", "%d: must be at least %d bytes, or negative for never by size", c.RotateSize, rotateSizeMin))
	}
	return errs
}

// Store is what the vacuum needs from the SQL layer (dialect.Dialect has
// it all).
type Store interface {
	// Tuning gives how many partitions a sweep prunes at once.
	Tuning() dialect.Tuning
	VacuumCounterList(ctx context.Context, params *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error)
	VacuumDelete(ctx context.Context, params *dialect.VacuumDeleteParams) (int, error)
	DedupExpire(ctx context.Context, params *dialect.DedupExpireParams) (int, error)
}

// TableVacuumer is an optional Store capability, found by type assertion:
// reclaiming the space of deleted rows when the database would not do it
// by itself (PostgreSQL with autovacuum off). The vacuum task calls it every
// Config.TableInterval.
type TableVacuumer interface {
	TableVacuum(ctx context.Context, params *dialect.TableVacuumParams) (dialect.TableVacuumResult, error)
}

// Rotator is an optional Store capability, found by type assertion:
// body and outgoing kept in generations that are truncated whole once every
// message in them is acked, instead of pruned row by row (PostgreSQL,
// MariaDB and SQLite; docs/ROTATION.md). The vacuum task calls it every round (a fraction of
// Config.RotateInterval, at most Config.Interval); while it keeps up, the
// store's VacuumCounterList lists nothing to prune, and when a generation
// is pinned (a consumer far behind, a parked partition), it lists again:
// rotation never keeps rows the prune would have removed.
type Rotator interface {
	TableRotate(ctx context.Context, params *dialect.TableRotateParams) (dialect.TableRotateResult, error)
}

// Vacuum is the pruning task.
type Vacuum struct {
	d         Store
	cfg       Config
	log       *slog.Logger
	workers   int
	deleted   atomic.Int64
	expired   atomic.Int64
	truncated atomic.Int64
}

// New builds a vacuum; cfg must be validated.
func New(d Store, cfg Config) *Vacuum {
	cfg = cfg.WithDefaults()
	// Partitions are swept in parallel where the database allows (see
	// dialect.Tuning): on a busy server one sweeping connection gets too
	// small a share to keep up with the acks (BENCHMARKS.md, "Figures
	// behind design choices", "Vacuum workers").
	return &Vacuum{d: d, cfg: cfg, log: cfg.Logger.With("component", "vacuum"), workers: max(1, d.Tuning().VacuumWorkers)}
}

// Deleted is the number of messages this process has pruned.
func (v *Vacuum) Deleted() int64 { return v.deleted.Load() }

// ExpiredKeys is the number of dedup keys this process has pruned.
func (v *Vacuum) ExpiredKeys() int64 { return v.expired.Load() }

// Truncated is the number of generations this process has truncated.
func (v *Vacuum) Truncated() int64 { return v.truncated.Load() }

// Run sweeps every Interval until stopping closes or ctx ends.
func (v *Vacuum) Run(ctx context.Context, stopping <-chan struct{}) error {
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if tv, ok := v.d.(TableVacuumer); ok && v.cfg.TableInterval > 0 {
		wg.Go(func() { v.vacuumTables(waitCtx, tv) })
	}
	if r, ok := v.d.(Rotator); ok && v.cfg.RotateInterval > 0 {
		wg.Go(func() { v.rotate(waitCtx, r) })
	}
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
				// processed rows pile up. Sweeping at once whenever a sweep
				// was merely large costs SQLite's single writer too much of
				// its sustained throughput (BENCHMARKS.md, "Figures behind
				// design choices", "Vacuum sweeps again when behind").
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

// Sweep prunes every partition with a positive counter once, and a chunk
// of expired dedup keys, and returns how many messages it deleted.
func (v *Vacuum) Sweep(ctx context.Context) (int, error) {
	total, _, err := v.sweep(ctx)
	return total, err
}

// sweep is Sweep, also reporting whether some partition had more than a
// chunk to delete: the vacuum is behind.
func (v *Vacuum) sweep(ctx context.Context) (total int, behind bool, err error) {
	counters, err := v.d.VacuumCounterList(ctx, &dialect.VacuumCounterListParams{})
	if err != nil {
		return 0, false, err
	}
	for _, c := range counters {
		behind = behind || c.ProcessedSeq-c.PrunedSeq > int64(v.cfg.Chunk)
	}
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(v.workers)
	for _, batch := range batches(counters, v.cfg.Chunk) {
		g.Go(func() error {
			n, err := v.d.VacuumDelete(ctx, &dialect.VacuumDeleteParams{Ranges: batch})
			v.deleted.Add(int64(n))
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && ctx.Err() == nil {
				// One failing batch must not stop the others; what it left
				// is found next time.
				errs = append(errs, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	// Dedup keys whose window passed, a chunk per sweep; a full chunk
	// means more are waiting, so the next sweep starts at once.
	n, err := v.d.DedupExpire(ctx, &dialect.DedupExpireParams{Limit: v.cfg.Chunk})
	v.expired.Add(int64(n))
	behind = behind || n == v.cfg.Chunk
	if err != nil && ctx.Err() == nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		return total, behind, ctx.Err()
	}
	return total, behind, errors.Join(errs...)
}

// batches groups the partitions' processed rows into transactions of at
// most chunk messages, several partitions to a transaction: with many
// lightly loaded partitions one transaction per partition would cost a
// commit and its round trips for a row or two. Each partition contributes
// one range of at most chunk rows (seqs are gap-free, so a seq range of n
// is n rows): batches then never share a partition and can run in
// parallel, and a partition further behind is taken up by the next sweep,
// which starts at once (see Run).
func batches(counters []dialect.VacuumCounter, chunk int) [][]dialect.VacuumRange {
	var out [][]dialect.VacuumRange
	var cur []dialect.VacuumRange
	room := int64(chunk)
	for _, c := range counters {
		n := min(c.ProcessedSeq-c.PrunedSeq, int64(chunk))
		if n <= 0 {
			continue
		}
		if n > room {
			out, cur, room = append(out, cur), nil, int64(chunk)
		}
		cur = append(cur, dialect.VacuumRange{PartitionID: c.PartitionID, FromSeq: c.PrunedSeq, ToSeq: c.PrunedSeq + n})
		room -= n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// vacuumTables calls the store's table vacuum every TableInterval until
// ctx ends; failures are logged and tried again next time.
func (v *Vacuum) vacuumTables(ctx context.Context, tv TableVacuumer) {
	for lifecycle.Sleep(ctx, v.cfg.TableInterval) {
		began := time.Now()
		var res dialect.TableVacuumResult
		err := lifecycle.Safely(func() (err error) {
			res, err = tv.TableVacuum(ctx, &dialect.TableVacuumParams{})
			return err
		})
		switch {
		case err != nil && ctx.Err() == nil:
			// Not the pipeline's failure: the next interval tries again.
			v.log.Warn("table vacuum failed; trying again next interval", slog.Any("error", err))
		case res.Vacuumed:
			v.log.Debug("tables vacuumed", slog.Duration("took", time.Since(began)))
		}
	}
}

// rotateRound is how often the rotator runs: often enough to switch close
// to RotateInterval and to truncate soon after a generation is acked.
func (c Config) rotateRound() time.Duration {
	return max(min(c.Interval, c.RotateInterval/4), 5*time.Millisecond)
}

// rotateHoldMargin is how much longer than a few rounds a round's hold of
// the prune lasts: the turn is the table VACUUM's too, and a round that
// finds it taken does not renew the hold, so the hold outlasts a VACUUM of
// the tables rather than let the prune start and stop again meanwhile.
const rotateHoldMargin = 30 * time.Second

// rotate runs a round of the store's rotation at once and then every
// rotateRound until ctx ends; failures are logged and tried again next
// round. Each round that keeps up holds the row-by-row prune for a while
// more, so that the prune resumes by itself if this process stops. The
// first round does not wait: until a round has held it, the prune deletes
// row by row what the rotation would truncate (on a new schema at 1,024
// partitions, about a second of database time per sweep).
func (v *Vacuum) rotate(ctx context.Context, r Rotator) {
	round := v.cfg.rotateRound()
	// A pinned generation whose partitions all move is a backlog draining
	// (docs/ROTATION.md, "The rotator"): the prune stays held until one of
	// them has not moved for an interval, or the current generation, which
	// cannot switch meanwhile, has grown to twice the switch size.
	drainLimit := 2 * v.cfg.RotateSize
	if v.cfg.RotateSize <= 0 {
		drainLimit = 2 * RotateSizeDefault
	}
	params := &dialect.TableRotateParams{Interval: v.cfg.RotateInterval, Size: max(v.cfg.RotateSize, 0),
		Hold: 5*round + rotateHoldMargin, LockTimeout: v.cfg.RotateLockTimeout,
		StallAfter: max(v.cfg.RotateInterval, 0), DrainLimit: drainLimit}
	pruning := false
	for first := true; first || lifecycle.Sleep(ctx, round); first = false {
		var res dialect.TableRotateResult
		err := lifecycle.Safely(func() (err error) {
			params.Now = time.Now()
			res, err = r.TableRotate(ctx, params)
			return err
		})
		switch {
		case err != nil && ctx.Err() == nil:
			v.log.Warn("table rotation failed; trying again next round", slog.Any("error", err))
			continue
		case err != nil:
			return
		}
		v.truncated.Add(int64(len(res.Truncated)))
		if p := res.Pinned && !res.Draining; res.Turn && p != pruning {
			pruning = p
			if pruning {
				v.log.Info("rotation pinned: a generation holds messages that stopped moving; pruning row by row meanwhile",
					slog.Any("refused", res.Refused))
			} else {
				v.log.Info("rotation keeps up again; row-by-row pruning paused")
			}
		}
	}
}
