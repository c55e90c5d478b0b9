// The processor pool: one task per partition of each queue with a
// handler, woken by the sequencer's notifier, a poll, or its retry timer.
// A partition is worked by one task in one process at a time, across every
// process sharing the database (a lease or a row lock), so order holds.

package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/configerr"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// Pool defaults; the seqbox package exports them.
const (
	ConcurrencyDefault  = 8
	PollIntervalDefault = time.Second
)

// PoolConfig tunes the pool.
type PoolConfig struct {
	// Concurrency is how many handler calls run at once, across all
	// queues. Defaults to 8. Leases and acks are taken outside those
	// slots: on PostgreSQL and MySQL/MariaDB by up to 8×Concurrency
	// partitions at once, folded into shared statements (see GroupLeaser),
	// so that many lightly loaded partitions do not wait on each other's
	// round trips; elsewhere by Concurrency partitions, a connection each.
	Concurrency int
	// PollInterval is how often the pool looks for work that no in-process
	// signal announced (rows sequenced by another process, expired leases
	// and retry times). Defaults to 1s.
	PollInterval time.Duration
	// Owner names this process in lease rows. Defaults to host-pid-random.
	Owner  string
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (c PoolConfig) WithDefaults() PoolConfig {
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.Owner == "" {
		c.Owner = DefaultOwner()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every setting that cannot work, named as the Builder
// takes it.
func (c PoolConfig) Validate() []error {
	var errs []error
	if c.Concurrency < 1 {
		errs = append(errs, configerr.New("ProcessorConcurrency", "%d: must be >= 1", c.Concurrency))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, configerr.New("PollInterval", "%v: must be > 0", c.PollInterval))
	}
	if len(c.Owner) < 1 || len(c.Owner) > 128 {
		errs = append(errs, configerr.New("InstanceID", "%+q: must be 1..128 bytes", c.Owner))
	} else {
		for i := 0; i < len(c.Owner); i++ {
			if c.Owner[i] < 0x20 || c.Owner[i] > 0x7e {
				// It is stored in every lease row (an ASCII column on MySQL).
				errs = append(errs, configerr.New("InstanceID", "%+q: use printable ASCII only", c.Owner))
				break
			}
		}
	}
	return errs
}

// DefaultOwner is host-pid-random: unique per process start.
func DefaultOwner() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune { // printable ASCII, as Validate wants
		if r < 0x20 || r > 0x7e {
			return '_'
		}
		return r
	}, host)
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	if len(owner) > 128 {
		owner = owner[len(owner)-128:]
	}
	return owner
}

// QueueSpec is one queue this pool processes.
type QueueSpec struct {
	Name string
	// Runner is the queue's bound handler; nil: enqueue only here.
	Runner        handling.Runner
	Transactional bool
	Options       handling.Options
	PartitionIDs  []int64 // by partition number
}

// PoolCounters are process-wide delivery counts.
type PoolCounters struct {
	Delivered    int64 // messages acked (dead letters not counted)
	Retried      int64 // failed handler calls that will be retried
	DeadLettered int64
	Parked       int64 // partitions parked (the Park failure policy)
	// Purged counts tombstones (purged messages that had a seq) passed over
	// without a handler call.
	Purged int64
}

// PoolStore is what the pool needs from the SQL layer (dialect.Dialect
// has it all).
type PoolStore interface {
	RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error
	IsRetryable(err error) bool
	IsTransient(err error) bool
	ProcessorReadyList(ctx context.Context, params *dialect.ProcessorReadyListParams) ([]int64, error)
	ProcessorLease(ctx context.Context, params *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error)
	ProcessorAck(ctx context.Context, params *dialect.ProcessorUpdateParams) error
	ProcessorLock(ctx context.Context, params *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error)
	OutgoingList(ctx context.Context, params *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error)
	ProcessorUpdate(ctx context.Context, params *dialect.ProcessorUpdateParams) error
}

// AckLeaser is an optional fast path of a Store, found by type assertion:
// a clean ack and the partition's next lease (with its batch read) in one
// transaction, so a partition with work costs one commit per batch instead
// of two. When the partition has nothing more, the lease is released and
// Leased is false. A Store without it (SQLite, where the single writer is
// the bottleneck and commits are cheap) acks, then leases.
type AckLeaser interface {
	ProcessorAckLease(ctx context.Context, params *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error)
}

// Pool runs one task per partition of every queue with a handler.
type Pool struct {
	d   PoolStore
	cfg PoolConfig
	log *slog.Logger
	// sem bounds handler calls; steps bounds partitions between a lease
	// and its ack (the database work).
	sem, steps *semaphore.Weighted
	tasks      map[int64]*task
	ids        []int64
	// groups folds concurrent leases and acks into one transaction each;
	// nil when the store has no GroupLeaser.
	groups *groups

	delivered, retried, deadLettered, parked, purged atomic.Int64
}

// NewPool builds the pool; cfg and every queue's options must be valid.
func NewPool(d PoolStore, cfg PoolConfig, queues []QueueSpec) *Pool {
	cfg = cfg.WithDefaults()
	p := &Pool{
		d: d, cfg: cfg, log: cfg.Logger.With("component", "processor"),
		sem: semaphore.NewWeighted(int64(cfg.Concurrency)), tasks: make(map[int64]*task),
	}
	steps := cfg.Concurrency
	if gl, ok := d.(GroupLeaser); ok {
		p.groups = newGroups(d, gl)
		steps = groupStepsPerSlot * cfg.Concurrency
	}
	p.steps = semaphore.NewWeighted(int64(steps))
	for _, q := range queues {
		if q.Runner == nil {
			continue // producer-only queue here; other processes consume it
		}
		for i, pid := range q.PartitionIDs {
			p.tasks[pid] = &task{
				pool: p, queue: q.Name, partition: i, id: pid, runner: q.Runner, transactional: q.Transactional, opts: q.Options,
				wake: make(chan struct{}, 1), batch: q.Options.BatchSize,
			}
			p.ids = append(p.ids, pid)
		}
	}
	return p
}

// Counters returns the delivery counts so far.
func (p *Pool) Counters() PoolCounters {
	return PoolCounters{Delivered: p.delivered.Load(), Retried: p.retried.Load(), DeadLettered: p.deadLettered.Load(),
		Parked: p.parked.Load(), Purged: p.purged.Load()}
}

// Notify wakes a partition's task; unknown partitions are ignored.
func (p *Pool) Notify(partitionID int64) {
	if t := p.tasks[partitionID]; t != nil {
		t.notify()
	}
}

// NotifyAll wakes the task of every partition this pool works.
func (p *Pool) NotifyAll() {
	for _, t := range p.tasks {
		t.notify()
	}
}

// Run works until stopping closes (in-flight batches finish) or ctx ends.
func (p *Pool) Run(ctx context.Context, stopping <-chan struct{}) error {
	if len(p.tasks) == 0 {
		return nil
	}
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	var g errgroup.Group
	for _, t := range p.tasks {
		g.Go(func() error { t.run(ctx, waitCtx); return nil })
	}
	// Rows may already wait from before this process started: the first
	// poll runs now. Waking every task instead sent one lease attempt per
	// partition at once, 1,024 of them at 1,024 partitions, queued ahead
	// of the first new messages' (docs/ARCHITECTURE.md, "The processor").
	if !p.pollReady(waitCtx) && waitCtx.Err() == nil {
		p.NotifyAll()
	}
	g.Go(func() error {
		for lifecycle.Sleep(waitCtx, p.cfg.PollInterval) {
			p.pollReady(waitCtx)
		}
		return nil
	})
	return g.Wait()
}

// pollReady wakes the tasks of the partitions with work that no lease or
// retry holds, and reports whether it could read them.
func (p *Pool) pollReady(ctx context.Context) bool {
	ids, err := p.d.ProcessorReadyList(ctx, &dialect.ProcessorReadyListParams{PartitionIDs: p.ids})
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("poll for ready partitions failed", slog.Any("error", err))
		}
		return false
	}
	for _, id := range ids {
		p.Notify(id)
	}
	return true
}
