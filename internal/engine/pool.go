// The processor pool: one task per partition of each queue with a
// handler, woken by the sequencer's notifier, a poll, or its retry timer.
// A partition is worked by one task in one process at a time, across every
// process sharing the database (a lease or a row lock), so order holds.

package engine

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/seqbox/seqbox/deadletter"
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
	// slots: on PostgreSQL and MySQL/MariaDB by up to 4×Concurrency
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
		t.notify() // rows may already wait from before this process started
		g.Go(func() error { t.run(ctx, waitCtx); return nil })
	}
	g.Go(func() error {
		for lifecycle.Sleep(waitCtx, p.cfg.PollInterval) {
			ids, err := p.d.ProcessorReadyList(waitCtx, &dialect.ProcessorReadyListParams{PartitionIDs: p.ids})
			if err != nil {
				if waitCtx.Err() == nil {
					p.log.Warn("poll for ready partitions failed", slog.Any("error", err))
				}
				continue
			}
			for _, id := range ids {
				p.Notify(id)
			}
		}
		return nil
	})
	return g.Wait()
}

// task is one partition's worker. Its fields other than wake are touched
// only by its own goroutine, so batch-size state is per partition.
type task struct {
	pool          *Pool
	queue         string
	partition     int
	id            int64
	runner        handling.Runner
	transactional bool
	opts          handling.Options
	wake          chan struct{}

	batch     int // current batch size: 1 after a failure, doubling back
	dbErrors  int
	retryWait time.Duration

	// pending is a lease taken by the last ack (ProcessorAckLease) with its
	// batch already read; the next step works it instead of leasing.
	pending *pendingLease
}

type pendingLease struct {
	lease dialect.ProcessorLeaseResult
	at    time.Time // when it was requested: the lease runs from here
	limit int
}

func (t *task) notify() {
	select {
	case t.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (t *task) run(ctx, waitCtx context.Context) {
	defer t.releasePending(ctx)
	var timer *time.Timer
	var timerC <-chan time.Time
	for {
		select {
		case <-waitCtx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-t.wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		for waitCtx.Err() == nil {
			if err := t.pool.steps.Acquire(waitCtx, 1); err != nil {
				return
			}
			more := t.step(ctx)
			t.pool.steps.Release(1)
			if t.retryWait > 0 {
				// Local timer for the retry; other processes read next_attempt_at.
				timer = time.NewTimer(t.retryWait + 5*time.Millisecond)
				timerC, t.retryWait = timer.C, 0
				break
			}
			if !more {
				break
			}
		}
	}
}

// step runs one batch, recovering panics outside the handler as DB-style
// errors, and reports whether more work is likely.
func (t *task) step(ctx context.Context) bool {
	var more bool
	err := lifecycle.Safely(func() error {
		var err error
		if t.transactional {
			more, err = t.stepTransactional(ctx)
		} else {
			more, err = t.stepLeased(ctx)
		}
		return err
	})
	if err == nil {
		t.dbErrors = 0
		return more
	}
	if ctx.Err() != nil {
		return false
	}
	t.dbErrors++
	t.retryWait = lifecycle.Backoff(t.dbErrors, 100*time.Millisecond, 30*time.Second)
	lifecycle.LogPanic(t.pool.log, "process partition failed", err,
		slog.String("queue", t.queue), slog.Int("partition", t.partition))
	return false
}

// call makes the handler call of a batch.
func (t *task) call(msgs []dialect.OutgoingMessage, attempts int, tx *bun.Tx) *handling.Call {
	c := &handling.Call{Queue: t.queue, Partition: t.partition, Tx: tx, Attempts: attempts,
		Messages: make([]handling.Message, len(msgs))}
	for i, m := range msgs {
		d := handling.Message{ID: m.ID, Key: m.Key, Seq: m.Seq, PayloadType: m.PayloadType, Payload: m.Payload, EnqueuedAt: m.CreatedAt}
		if len(m.Headers) > 0 {
			if err := json.Unmarshal(m.Headers, &d.Headers); err != nil {
				t.pool.log.Warn("message headers are not a JSON object; delivered without them",
					slog.String("queue", t.queue), slog.Int("partition", t.partition), slog.Int64("seq", m.Seq),
					slog.String("message_id", m.ID.String()), slog.Any("error", err))
			}
		}
		c.Messages[i] = d
	}
	return c
}

// outcome turns a handler result into the cursor update. acked counts
// messages done (rejected ones included); failed is set when the first
// unacked message must be retried, parked when it stops the partition.
type outcome struct {
	update  *dialect.ProcessorUpdateParams
	acked   int
	dead    int
	failed  bool
	parked  bool
	failure error
	// head is the message failure concerns: retried, parked on, or (with
	// headDead) dead-lettered after max attempts, its letter the last of
	// update.DeadLetters; the other letters are rejections.
	head     dialect.OutgoingMessage
	headDead bool
}

func (t *task) decide(state dialect.ProcessorState, owner string, msgs []dialect.OutgoingMessage, res handling.Result, herr error) outcome {
	// deliveries counts this delivery too: the head's continues its
	// earlier failures, a message behind it was never delivered before.
	deliveries := func(i int) int {
		if i == 0 {
			return state.Attempts + 1
		}
		return 1
	}
	var dls []dialect.DeadLetter
	dead := map[int]bool{}
	for i := 0; i < res.Acked; i++ {
		if rerr, ok := res.Rejected[i]; ok {
			dls = append(dls, NewDeadLetter(t.id, msgs[i], rerr, deliveries(i)))
			dead[i] = true
		}
	}
	acked := res.Acked
	switch {
	case herr == nil:
		acked = len(msgs)
	case acked >= len(msgs):
		// Everything was acked before the error: no message is left to
		// retry, reject or blame (and msgs[acked] below would not exist).
		herr = nil
	case isRejected(herr):
		dls = append(dls, NewDeadLetter(t.id, msgs[acked], herr, deliveries(acked)))
		dead[acked] = true
		acked++
		herr = nil
	}
	seqAt := func(n int) int64 {
		if n == 0 {
			return state.ProcessedSeq
		}
		return msgs[n-1].Seq
	}
	if herr == nil {
		u := dialect.ProcessorAdvance(t.id, owner, seqAt(acked), dls)
		u.ResolveReplays = replaysAcked(msgs, acked, dead)
		return outcome{update: u, acked: acked, dead: len(dls)}
	}
	// The head of what is left failed. Its count continues only if it was
	// already the head; a new head starts at one.
	failures := deliveries(acked)
	if t.opts.DeadLetters(failures) && t.opts.OnFailure == handling.Park {
		// The head stays where it is; nothing behind it is delivered until
		// an operator resumes or skips it (Admin).
		u := dialect.ProcessorFailure(t.id, owner, seqAt(acked), failures,
			dialect.ErrorText(dialect.ErrorString(herr)), 0, dls)
		u.Park = true
		u.ResolveReplays = replaysAcked(msgs, acked, dead)
		return outcome{update: u, acked: acked, dead: len(dls), parked: true, failure: herr, head: msgs[acked]}
	}
	if t.opts.DeadLetters(failures) {
		head := msgs[acked]
		dls = append(dls, NewDeadLetter(t.id, head, fmt.Errorf("after %d attempts: %w", failures, herr), failures))
		dead[acked] = true
		acked++
		u := dialect.ProcessorAdvance(t.id, owner, seqAt(acked), dls)
		u.ResolveReplays = replaysAcked(msgs, acked, dead)
		return outcome{update: u, acked: acked, dead: len(dls), failure: herr, head: head, headDead: true}
	}
	delay := lifecycle.FullJitter(failures, t.opts.RetryBase, t.opts.RetryMax)
	u := dialect.ProcessorFailure(t.id, owner, seqAt(acked), failures,
		dialect.ErrorText(dialect.ErrorString(herr)), max(delay, time.Millisecond), dls)
	u.ResolveReplays = replaysAcked(msgs, acked, dead)
	return outcome{update: u, acked: acked, dead: len(dls), failed: true, failure: herr, head: msgs[acked]}
}

// replaysAcked returns the ids of the first n messages that replay a dead
// letter (deadletter.ReplayOfHeader) and were acked, not dead-lettered:
// their letters become resolved with this outcome.
func replaysAcked(msgs []dialect.OutgoingMessage, n int, dead map[int]bool) []dialect.MessageID {
	var out []dialect.MessageID
	for i := 0; i < n && i < len(msgs); i++ {
		if isReplay(msgs[i].Headers) && !dead[i] {
			out = append(out, msgs[i].ID)
		}
	}
	return out
}

// record counts an applied outcome, logs its failures and dead letters,
// and adapts the batch size: it falls to 1 after a failure to isolate a
// poison message, then doubles back.
func (t *task) record(o outcome, full bool) bool {
	p := t.pool
	p.deadLettered.Add(int64(o.dead))
	p.delivered.Add(int64(o.acked - o.dead))
	letters := o.update.DeadLetters
	if o.headDead {
		d := letters[len(letters)-1]
		letters = letters[:len(letters)-1]
		p.log.Error("message dead-lettered after max attempts", append(t.logAt(o.head.Seq, o.head.ID),
			slog.Int64("dead_letter_id", d.ID), slog.Int("attempts", d.Attempts), slog.Any("error", o.failure))...)
	}
	for _, d := range letters {
		p.log.Warn("message rejected by its handler; dead-lettered", append(t.logAt(d.Seq, d.MessageID),
			slog.Int64("dead_letter_id", d.ID), slog.String("error", d.LastError))...)
	}
	if o.parked {
		p.parked.Add(1)
		t.batch = 1
		p.log.Error("partition parked: its head failed max attempts; resume or skip it (seqbox partitions)",
			append(t.logAt(o.head.Seq, o.head.ID), slog.Int("attempts", o.update.Attempts), slog.Any("error", o.failure))...)
		return false
	}
	if o.failed {
		p.retried.Add(1)
		t.batch = 1
		t.retryWait = o.update.RetryAfter
		p.log.Warn("handler failed; will retry", append(t.logAt(o.head.Seq, o.head.ID), slog.Int("attempts", o.update.Attempts),
			slog.Duration("retry_in", o.update.RetryAfter), slog.Any("error", o.failure))...)
		return false
	}
	t.batch = min(t.batch*2, t.opts.BatchSize)
	return full || o.dead > 0
}

// logAt is what a log line about one message starts with: where an
// operator finds it (`seqbox partitions`; `seqbox dlq show` takes the
// message id, the other dlq actions the dead_letter_id logged with it).
func (t *task) logAt(seq int64, id dialect.MessageID) []any {
	return []any{slog.String("queue", t.queue), slog.Int("partition", t.partition), slog.Int64("seq", seq),
		slog.String("message_id", id.String())}
}

// releasePending gives back a lease taken by the last ack but not worked
// (the pool is stopping), restoring the head's attempt count.
func (t *task) releasePending(ctx context.Context) {
	if t.pending == nil {
		return
	}
	state := t.pending.lease.State
	t.pending = nil
	t.giveBack(ctx, state)
}

// giveBack releases a lease that was taken but not worked, restoring the
// head's attempt count.
func (t *task) giveBack(ctx context.Context, state dialect.ProcessorState) {
	err := t.apply(ctx, dialect.ProcessorFailure(t.id, t.pool.cfg.Owner, state.ProcessedSeq, state.Attempts, "", 0, nil))
	if err != nil && ctx.Err() == nil {
		t.pool.log.Warn("release unused lease failed; it expires by itself", slog.String("queue", t.queue),
			slog.Int("partition", t.partition), slog.Any("error", err))
	}
}

// stepLeased: lease (attempts counted now, so a process crash leaves a trace), read,
// run the handler outside any transaction, then ack guarded by the lease.
// A clean ack takes the next lease in the same transaction.
func (t *task) stepLeased(ctx context.Context) (bool, error) {
	p := t.pool
	if pl := t.pending; pl != nil && time.Since(pl.at) >= t.opts.Lease-t.opts.LeaseHeadroom {
		// Waited for a slot past the handler's deadline: give it back and
		// lease afresh rather than hand the handler an expired context.
		t.releasePending(ctx)
	}
	leaseStart, limit := time.Now(), t.batch
	var lease dialect.ProcessorLeaseResult
	if pl := t.pending; pl != nil {
		t.pending = nil
		lease, leaseStart, limit = pl.lease, pl.at, pl.limit
	} else {
		var err error
		lease, err = p.lease(ctx, &dialect.ProcessorLeaseParams{PartitionID: t.id, Owner: p.cfg.Owner, Duration: t.opts.Lease, Limit: limit})
		if err != nil || !lease.Leased {
			return false, err // leased elsewhere, backing off, or empty: a poll or notify brings us back
		}
	}
	state, msgs := lease.State, lease.Messages
	if k := leadingPurged(msgs); k > 0 {
		// Tombstones at the head: pass over them, no handler call.
		if err := t.apply(ctx, dialect.ProcessorAdvance(t.id, p.cfg.Owner, msgs[k-1].Seq, nil)); err != nil {
			return t.ackFailed(err)
		}
		p.purged.Add(int64(k))
		return true, nil
	}
	full := len(msgs) == limit
	if cut := firstPurged(msgs); cut < len(msgs) {
		msgs, full = msgs[:cut], true // the tombstones are the next step's head
	}
	abandoned := t.opts.DeadLetters(state.Attempts)
	if abandoned && len(msgs) > 1 {
		msgs = msgs[:1] // the head was leased MaxAttempts times and never acked: a crash loop
	}
	if len(msgs) == 0 {
		return false, t.apply(ctx, dialect.ProcessorFailure(t.id, p.cfg.Owner, state.ProcessedSeq, state.Attempts, "", 0, nil))
	}
	var o outcome
	if abandoned {
		o = t.decide(state, p.cfg.Owner, msgs, handling.Result{}, fmt.Errorf("lease taken %d times without an ack", state.Attempts))
	} else {
		deadline := leaseStart.Add(t.opts.Lease - t.opts.LeaseHeadroom)
		if err := p.sem.Acquire(ctx, 1); err != nil {
			t.giveBack(ctx, state)
			return false, err
		}
		if !time.Now().Before(deadline) {
			// Waited for a handler slot past the handler's deadline: give
			// the lease back and lease afresh.
			p.sem.Release(1)
			t.giveBack(ctx, state)
			return true, nil
		}
		hctx, cancel := context.WithDeadline(ctx, deadline)
		res := t.runner.Run(hctx, t.call(msgs, state.Attempts, nil))
		cancel()
		p.sem.Release(1)
		o = t.decide(state, p.cfg.Owner, msgs, res, res.Err)
	}
	if !abandoned && !o.failed && o.failure == nil && o.dead == 0 {
		return t.ackAndLease(ctx, o, full)
	}
	if err := t.recordOutcome(ctx, o.update, t.apply); err != nil {
		return t.ackFailed(err)
	}
	return t.record(o, !abandoned && full), nil
}

// ackAndLease acks a clean batch and, while the partition has more work,
// keeps the lease and reads the next batch in the same transaction.
func (t *task) ackAndLease(ctx context.Context, o outcome, full bool) (bool, error) {
	p := t.pool
	next := &dialect.ProcessorLeaseParams{PartitionID: t.id, Owner: p.cfg.Owner, Duration: t.opts.Lease,
		Limit: min(t.batch*2, t.opts.BatchSize)} // the size record sets after a success
	at := time.Now()
	lease, err := p.ackLease(ctx, &dialect.ProcessorAckLeaseParams{Ack: o.update, Next: next})
	if err != nil {
		return t.ackFailed(err)
	}
	t.record(o, full)
	if lease.Leased {
		t.pending = &pendingLease{lease: lease, at: at, limit: next.Limit}
		return true, nil
	}
	return false, nil // nothing sequenced past this ack: a notify brings us back
}

// ackLease acks a clean outcome and takes the next lease: grouped with
// other partitions' when the store can, else alone.
func (p *Pool) ackLease(ctx context.Context, params *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	if p.groups != nil && params.Ack.Clean() {
		return p.groups.acks.runAlone(ctx, params)
	}
	return ackLeaseOne(ctx, p.d, params)
}

// ackLeaseOne is ackLease for one partition: in one transaction when the
// store has the fast path, else one after the other.
func ackLeaseOne(ctx context.Context, d PoolStore, params *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	if al, ok := d.(AckLeaser); ok {
		return al.ProcessorAckLease(ctx, params)
	}
	if err := d.ProcessorAck(ctx, params.Ack); err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	return d.ProcessorLease(ctx, params.Next)
}

// lease takes a partition's lease and reads its batch, grouped with other
// partitions' when the store can.
func (p *Pool) lease(ctx context.Context, params *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	if p.groups != nil {
		return p.groups.leases.runAlone(ctx, params)
	}
	return p.d.ProcessorLease(ctx, params)
}

// ackFailed is a step's result after a failed ack. A lost lease is not an
// error: the lease expired and another process took the partition; it
// redelivers what we could not ack (at-least-once).
func (t *task) ackFailed(err error) (bool, error) {
	if errors.Is(err, dialect.ErrLeaseLost) {
		t.pool.log.Warn("lease lost before ack", slog.String("queue", t.queue), slog.Int("partition", t.partition))
		return false, nil
	}
	return false, err
}

func (t *task) apply(ctx context.Context, u *dialect.ProcessorUpdateParams) error {
	return t.pool.d.ProcessorAck(ctx, u)
}

// recordOutcome applies u (or, with u nil, an outcome apply decides
// itself) and, should the database refuse it for a reason
// other than a conflict, a lost lease or the end of ctx, applies it once
// more with every error text replaced by a fixed note. The error text is
// the one part of an outcome that comes from outside, and a failure that
// cannot be recorded would be retried for ever without MaxAttempts ever
// counting it. The first refusal is logged: it is a seqbox bug to report.
func (t *task) recordOutcome(ctx context.Context, u *dialect.ProcessorUpdateParams,
	apply func(context.Context, *dialect.ProcessorUpdateParams) error) error {
	err := apply(ctx, u)
	if err == nil || ctx.Err() != nil || errors.Is(err, dialect.ErrLeaseLost) || t.pool.d.IsRetryable(err) ||
		(u != nil && !hasErrorText(u)) {
		return err
	}
	t.pool.log.Error("recording a handler failure was refused; recording it without the error text",
		slog.String("queue", t.queue), slog.Int("partition", t.partition), slog.Any("error", err))
	if u == nil {
		// The outcome is decided inside apply; a non-nil argument asks it
		// to drop the error text.
		return apply(ctx, &dialect.ProcessorUpdateParams{})
	}
	plain := withoutErrorText(u)
	err = apply(ctx, plain)
	for i, d := range plain.DeadLetters {
		u.DeadLetters[i].ID = d.ID // for the log
	}
	return err
}

// unrecordedErrorText stands in for an error text the database refused.
const unrecordedErrorText = "seqbox: the handler's error text could not be stored; see the process log"

func hasErrorText(u *dialect.ProcessorUpdateParams) bool {
	if u.LastError != "" {
		return true
	}
	for _, d := range u.DeadLetters {
		if d.LastError != "" {
			return true
		}
	}
	return false
}

func withoutErrorText(u *dialect.ProcessorUpdateParams) *dialect.ProcessorUpdateParams {
	c := *u
	if c.LastError != "" {
		c.LastError = unrecordedErrorText
	}
	c.DeadLetters = append([]dialect.DeadLetter(nil), u.DeadLetters...)
	for i := range c.DeadLetters {
		c.DeadLetters[i].LastError = unrecordedErrorText
	}
	return &c
}

// isRejected is errors.Is(err, ErrRejected) for an error from a handler,
// whose Is or Unwrap methods may panic: such an error is a plain failure.
func isRejected(err error) (rejected bool) {
	defer func() {
		if recover() != nil {
			rejected = false
		}
	}()
	return errors.Is(err, handling.ErrRejected)
}

// errRollback unwinds the transaction after a handler failure.
var errRollback = errors.New("seqbox: handler failed, rolling back")

// stepTransactional: lock the processor row, read, run the handler and ack
// in one transaction. A failure rolls back everything; the failure itself is
// then recorded in a second, small transaction.
func (t *task) stepTransactional(ctx context.Context) (bool, error) {
	p := t.pool
	// The handler runs inside the transaction: the whole step is its call.
	if err := p.sem.Acquire(ctx, 1); err != nil {
		return false, err
	}
	defer p.sem.Release(1)
	var (
		state  dialect.ProcessorState
		locked bool
		msgs   []dialect.OutgoingMessage
		herr   error
		o      outcome
		full   bool
		purged int
	)
	limit := t.batch
	err := p.d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		lock, err := p.d.ProcessorLock(ctx, &dialect.ProcessorLockParams{Conn: tx, PartitionID: t.id})
		if state, locked = lock.State, lock.Locked; err != nil || !locked {
			return err
		}
		msgs, err = p.d.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: tx, PartitionID: t.id, AfterSeq: state.ProcessedSeq, Limit: limit})
		if err != nil || len(msgs) == 0 {
			return err
		}
		if purged = leadingPurged(msgs); purged > 0 {
			// Tombstones at the head: pass over them, no handler call.
			u := dialect.ProcessorAdvance(t.id, "", msgs[purged-1].Seq, nil)
			u.Conn = tx
			return p.d.ProcessorUpdate(ctx, u)
		}
		full = len(msgs) == limit
		if cut := firstPurged(msgs); cut < len(msgs) {
			msgs, full = msgs[:cut], true // the tombstones are the next step's head
		}
		hctx, cancel := context.WithTimeout(ctx, t.opts.HandlerTimeout)
		res := t.runner.Run(hctx, t.call(msgs, state.Attempts, &tx))
		cancel()
		if herr = res.Err; herr != nil {
			return errRollback
		}
		o = t.decide(state, "", msgs, res, nil)
		o.update.Conn = tx
		return p.d.ProcessorUpdate(ctx, o.update)
	})
	switch {
	case errors.Is(err, errRollback):
	case err != nil:
		return false, err
	case !locked || len(msgs) == 0:
		return false, nil
	case purged > 0:
		p.purged.Add(int64(purged))
		return true, nil
	default:
		return t.record(o, full), nil
	}
	if len(msgs) > 1 {
		// Rolled back with other messages in the batch: isolate the failing
		// one by retrying at batch size 1 right away; nothing is counted yet.
		// (Not on acks alone: a lone message acked and then failed would
		// come back here forever, with no delay and no attempt counted.)
		t.batch = 1
		return true, nil
	}
	// The head failed alone: record it (or dead-letter it) under the row lock.
	err = t.recordOutcome(ctx, nil, func(ctx context.Context, plain *dialect.ProcessorUpdateParams) error {
		return p.d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			now, err := p.d.ProcessorLock(ctx, &dialect.ProcessorLockParams{Conn: tx, PartitionID: t.id})
			if err != nil || !now.Locked || now.State.ProcessedSeq != state.ProcessedSeq {
				locked = false
				return err
			}
			locked = true
			o = t.decide(now.State, "", msgs[:1], handling.Result{}, herr)
			if plain != nil {
				o.update = withoutErrorText(o.update) // the retry of recordOutcome
			}
			o.update.Conn = tx
			return p.d.ProcessorUpdate(ctx, o.update)
		})
	})
	if err != nil || !locked {
		return false, err
	}
	return t.record(o, false), nil
}

// leadingPurged counts the tombstones (Purge) at the head of a batch.
func leadingPurged(msgs []dialect.OutgoingMessage) int {
	n := 0
	for n < len(msgs) && msgs[n].Purged {
		n++
	}
	return n
}

// firstPurged is the index of the first tombstone of a batch, or its length.
func firstPurged(msgs []dialect.OutgoingMessage) int {
	for i, m := range msgs {
		if m.Purged {
			return i
		}
	}
	return len(msgs)
}

// isReplay reports a message that replays a dead letter
// (deadletter.ReplayOfHeader) from its stored headers.
func isReplay(headers []byte) bool {
	if len(headers) == 0 || !bytes.Contains(headers, []byte(deadletter.ReplayOfHeader)) {
		return false
	}
	var h map[string]string
	if json.Unmarshal(headers, &h) != nil {
		return false
	}
	_, ok := h[deadletter.ReplayOfHeader]
	return ok
}

// NewDeadLetter copies an outgoing message into a dead-letter record. The
// cause's text is made storable on every database (dialect.ErrorText): it
// is data from anywhere and must never stop the record from being written.
func NewDeadLetter(partitionID int64, m dialect.OutgoingMessage, cause error, attempts int) dialect.DeadLetter {
	msg := "rejected"
	if cause != nil {
		msg = dialect.ErrorString(cause)
	}
	return dialect.DeadLetter{
		PartitionID: partitionID, Seq: m.Seq, MessageID: m.ID, Key: m.Key, PayloadType: m.PayloadType,
		Payload: m.Payload, Headers: m.Headers, CreatedAt: m.CreatedAt, LastError: dialect.ErrorText(msg), Attempts: attempts,
	}
}
