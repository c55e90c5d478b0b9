// Package sequencer moves committed incoming rows of dirty partitions to
// the outgoing table with gap-free per-partition seqs, then wakes that
// partition's processor. A reconciler scan is the safety net for dirty
// signals that never arrived (other processes, crashes).
//
// Applications do not use this package directly: it exports only what
// seqbox's engine wires together (docs/ARCHITECTURE.md, "The public
// surface"), and its API carries no compatibility promise; it may change
// in any release.
package sequencer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox/internal/configerr"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/prioritizer"
)

// Defaults.
const (
	WorkersDefault            = 4
	BatchSizeDefault          = 1000
	MaxInnerIterationsDefault = 4
	ReconcileIntervalDefault  = time.Second
	MovePartitionsDefault     = 32
)

// Config tunes the sequencer.
type Config struct {
	// Workers is how many moves run at once (each of up to MovePartitions
	// partitions). Defaults to the database's measured default
	// (dialect.Tuning: 2 on PostgreSQL and MySQL/MariaDB, 1 on SQLite;
	// BENCHMARKS.md, "Figures behind design choices", "Sequencer workers
	// per database"), or WorkersDefault where none is known.
	Workers int
	// BatchSize is the rows moved per transaction. Defaults to 1000.
	BatchSize int
	// MaxInnerIterations is how many full batches a worker moves from one
	// partition before it yields it to others. Defaults to 4.
	MaxInnerIterations int
	// MovePartitions is the most partitions a worker moves in one
	// transaction when several are waiting: with many lightly loaded
	// partitions a commit per partition is what costs. 1 moves one at a
	// time. Defaults to 32.
	MovePartitions int
	// ReconcileInterval is the period of the incoming-table scan. Defaults to 1s.
	ReconcileInterval time.Duration
	Logger            *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.MaxInnerIterations = cmp.Or(c.MaxInnerIterations, MaxInnerIterationsDefault)
	c.MovePartitions = cmp.Or(c.MovePartitions, MovePartitionsDefault)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, ReconcileIntervalDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Store is what the sequencer needs from the SQL layer (dialect.Dialect
// has it all).
type Store interface {
	// Tuning gives the database's default worker count.
	Tuning() dialect.Tuning
	IsRetryable(err error) bool
	IncomingPartitionList(ctx context.Context, params *dialect.IncomingPartitionListParams) ([]int64, error)
	SequenceMove(ctx context.Context, params *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error)
	SequenceMoveMany(ctx context.Context, params *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error)
}

// Validate reports every setting that cannot work, named as the Builder
// takes it.
func (c Config) Validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, configerr.New(field, format, args...)) }
	if c.Workers < 1 {
		bad("SequencerWorkers", "%d: must be >= 1", c.Workers)
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		bad("SequencerBatchSize", "%d: must be 1..10000", c.BatchSize)
	}
	if c.MaxInnerIterations < 1 {
		bad("SequencerMaxIterations", "%d: must be >= 1", c.MaxInnerIterations)
	}
	if c.MovePartitions < 1 || c.MovePartitions > 1024 {
		bad("SequencerMovePartitions", "%d: must be 1..1024", c.MovePartitions)
	}
	if c.ReconcileInterval <= 0 {
		bad("ReconcileInterval", "%v: must be > 0", c.ReconcileInterval)
	}
	return errs
}

// Notify is called after a commit that sequenced rows into a partition.
type Notify func(partitionID int64)

// Sequencer runs the workers and the reconciler.
type Sequencer struct {
	d      Store
	prio   *prioritizer.Prioritizer
	notify Notify
	cfg    Config
	log    *slog.Logger

	sequenced atomic.Int64
}

// New builds a sequencer; cfg must be validated.
func New(d Store, prio *prioritizer.Prioritizer, notify Notify, cfg Config) *Sequencer {
	if cfg.Workers == 0 {
		cfg.Workers = d.Tuning().SequencerWorkers
	}
	cfg = cfg.WithDefaults()
	return &Sequencer{d: d, prio: prio, notify: notify, cfg: cfg, log: cfg.Logger.With("component", "sequencer")}
}

// Sequenced is the number of rows this process has sequenced.
func (s *Sequencer) Sequenced() int64 { return s.sequenced.Load() }

// Run works until stopping closes (finishing the batch in hand) or ctx ends.
func (s *Sequencer) Run(ctx context.Context, stopping <-chan struct{}) error {
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	var g errgroup.Group
	for range s.cfg.Workers {
		g.Go(func() error {
			for {
				claim, err := s.prio.Take(waitCtx)
				if err != nil {
					return nil
				}
				claims := []*prioritizer.Claim{claim}
				for len(claims) < s.cfg.MovePartitions {
					more := s.prio.TryTake()
					if more == nil {
						break
					}
					claims = append(claims, more)
				}
				if len(claims) == 1 {
					s.work(ctx, claim)
				} else {
					s.workMany(ctx, claims)
				}
			}
		})
	}
	g.Go(func() error {
		for {
			if err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reconcile scan failed", slog.Any("error", err))
			}
			if !lifecycle.Sleep(waitCtx, s.cfg.ReconcileInterval) {
				return nil
			}
		}
	})
	return g.Wait()
}

// Reconcile marks every partition with incoming rows dirty.
func (s *Sequencer) Reconcile(ctx context.Context) error {
	ids, err := s.d.IncomingPartitionList(ctx, &dialect.IncomingPartitionListParams{})
	if err != nil {
		return err
	}
	for _, id := range ids {
		s.prio.MarkDirty(id)
	}
	return nil
}

// workMany moves several claimed partitions in one transaction and reports
// each outcome. A partition whose batch was full goes to the back of the
// line with its rows still waiting (saturated), so that one busy partition
// never holds the others' transaction open for long.
func (s *Sequencer) workMany(ctx context.Context, claims []*prioritizer.Claim) {
	defer func() {
		for _, c := range claims {
			c.Release()
		}
	}()
	pids := make([]int64, len(claims))
	for i, c := range claims {
		pids[i] = c.PartitionID()
	}
	// A small share each keeps the shared transaction short: the messages
	// of every partition in it wait for its commit. A partition that fills
	// its share has a backlog, and goes on alone in full batches (work).
	limit := min(s.cfg.BatchSize, manyShare)
	var results []dialect.SequenceMoveResult
	err := lifecycle.Safely(func() (err error) {
		results, err = s.d.SequenceMoveMany(ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: limit})
		return err
	})
	if err == nil && len(results) != len(claims) {
		err = fmt.Errorf("sequencer: %d results for %d partitions", len(results), len(claims))
	}
	if err != nil {
		for _, c := range claims {
			s.failed(ctx, c, err)
		}
		return
	}
	var backlog []int
	for i, res := range results {
		c := claims[i]
		switch {
		case res.Skipped:
			c.Skipped() // another instance holds it: it will move the rows
		case res.Moved >= limit:
			s.sequenced.Add(int64(res.Moved))
			s.notify(res.PartitionID)
			backlog = append(backlog, i)
		case res.Moved > 0:
			s.sequenced.Add(int64(res.Moved))
			s.notify(res.PartitionID)
			c.Done(res.Moved, false)
		default:
			c.Done(0, false)
		}
	}
	for _, i := range backlog {
		s.workFrom(ctx, claims[i], results[i].Moved)
	}
}

// manyShare is the most rows a partition moves in a shared transaction.
const manyShare = 100

// failed reports a claim whose move failed.
func (s *Sequencer) failed(ctx context.Context, claim *prioritizer.Claim, err error) {
	switch {
	case ctx.Err() != nil:
		// Shutting down: the rolled-back batch stays in incoming.
	case s.d.IsRetryable(err):
		claim.Retry()
	default:
		lifecycle.LogPanic(s.log, "sequence partition failed", fmt.Errorf("partition %d: %w", claim.PartitionID(), err))
		claim.Failed()
	}
}

// work moves batches of one claimed partition and reports the outcome.
func (s *Sequencer) work(ctx context.Context, claim *prioritizer.Claim) {
	defer claim.Release()
	s.workFrom(ctx, claim, 0)
}

// workFrom is work for a partition that already moved some rows in this
// claim (a full share of a shared transaction), counted in already.
func (s *Sequencer) workFrom(ctx context.Context, claim *prioritizer.Claim, already int) {
	pid := claim.PartitionID()
	err := lifecycle.Safely(func() error {
		moved := already
		for range s.cfg.MaxInnerIterations {
			res, err := s.d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: s.cfg.BatchSize})
			if err != nil {
				return err
			}
			if res.Skipped {
				// Another instance holds the partition: it will move the rows.
				if moved > 0 {
					claim.Done(moved, false)
				} else {
					claim.Skipped()
				}
				return nil
			}
			if res.Moved > 0 {
				moved += res.Moved
				s.sequenced.Add(int64(res.Moved))
				s.notify(pid)
			}
			if res.Moved < s.cfg.BatchSize {
				claim.Done(moved, false)
				return nil
			}
		}
		claim.Done(moved, true) // saturated: back of the line, others get a turn
		return nil
	})
	if err != nil {
		s.failed(ctx, claim, err)
	}
}
