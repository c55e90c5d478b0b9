// Package engine is the running outbox behind seqbox.Outbox: it validates
// the configuration, registers the queues and wires the pipeline stages
// (prioritizer, sequencer, the processor pool, vacuum) together
// (docs/ARCHITECTURE.md, "The pipeline"). Applications never import it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/prioritizer"
	"github.com/seqbox/seqbox/sequencer"
	"github.com/seqbox/seqbox/vacuum"
)

type queueInfo struct {
	name        string
	ids         []int64
	dedupWindow time.Duration
}

// Outbox is a running outbox: enqueue through it, stop it when done.
type Outbox struct {
	d   dialect.Dialect
	cfg Config
	log *slog.Logger

	queues map[string]*queueInfo

	prio  *prioritizer.Prioritizer
	seq   *sequencer.Sequencer
	procs *Pool
	vac   *vacuum.Vacuum

	enqueued   atomic.Int64
	duplicates atomic.Int64
	// notify tells other processes about this one's work; nil without.
	notify *notifier

	stopping chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	// tasks are the background tasks, and what they start that may outlive
	// the call that started it; done is closed once all have returned.
	tasks  errgroup.Group
	done   chan struct{}
	runErr error
}

// A dialect serves every stage.
var (
	_ sequencer.Store = dialect.Dialect(nil)
	_ PoolStore       = dialect.Dialect(nil)
	_ vacuum.Store    = dialect.Dialect(nil)
)

// Start validates cfg, migrates if asked, registers the queues and starts
// the background tasks. The tasks outlive ctx; end them with Stop.
// Migration and registration retry transient errors (a dropped
// connection, a deadlock) until ctx ends. Tables absent or older than this
// release, without Migrate, are an outbox.ErrSchemaMissing.
func Start(ctx context.Context, d dialect.Dialect, cfg Config) (*Outbox, error) {
	cfg = cfg.WithDefaults(d)
	if errs := cfg.Validate(d); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Migrate {
		if err := retryTransient(ctx, d, cfg.Logger, "migrate", func() error {
			return d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{})
		}); err != nil {
			return nil, err
		}
	}
	o := &Outbox{
		d: d, cfg: cfg, log: cfg.Logger, queues: make(map[string]*queueInfo),
		stopping: make(chan struct{}), done: make(chan struct{}),
	}
	// All queues or none: a mismatch on one must not leave the others
	// registered with counts the application did not end up starting with.
	defs := make([]dialect.QueueDef, len(cfg.Queues))
	for i, q := range cfg.Queues {
		defs[i] = dialect.QueueDef{Queue: q.Name, Partitions: q.Partitions}
	}
	var specs []QueueSpec
	if len(defs) > 0 {
		var allIDs [][]int64
		if err := retryTransient(ctx, d, cfg.Logger, "register queues", func() error {
			var err error
			allIDs, err = d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: defs})
			return err
		}); err != nil {
			return nil, schemaMissing(ctx, d, err)
		}
		for i, q := range cfg.Queues {
			o.queues[q.Name] = &queueInfo{name: q.Name, ids: allIDs[i], dedupWindow: q.Options.DedupWindow}
			spec := QueueSpec{Name: q.Name, Options: q.Options, PartitionIDs: allIDs[i]}
			if q.Handler != nil {
				spec.Transactional = q.Handler.Transactional()
				spec.Runner = q.Handler.Bind(q.OptionValues)
			}
			specs = append(specs, spec)
		}
	}
	// Prepared now, while Start holds no connection: a statement first run
	// inside a transaction is then never prepared for that one run. A
	// producer-only outbox too: PostgreSQL's enqueue is prepared.
	if err := retryTransient(ctx, d, cfg.Logger, "prepare statements", func() error { return d.Prepare(ctx) }); err != nil {
		return nil, err
	}
	if bp, ok := d.(bufferPoolDialect); ok {
		checkBufferPool(ctx, bp, o.log)
	}
	o.prio = prioritizer.New(prioritizer.Config{ProbeWindow: cfg.MaybeDirtyWindow})
	o.procs = NewPool(d, cfg.Processor, specs)
	if wn, ok := d.(dialect.WakeupNotifier); ok && !cfg.NoWakeups {
		o.notify = newNotifier(wn, cfg.Processor.Owner, cfg.Logger)
	}
	o.seq = sequencer.New(d, o.prio, func(pid int64) {
		o.procs.Notify(pid)
		o.notify.add(nil, []int64{pid}) // processors of other processes
	}, cfg.Sequencer)
	o.vac = vacuum.New(d, cfg.Vacuum)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.cancel = cancel
	g := &o.tasks
	if db := d.DB(); db != nil && db.DB != nil {
		cw := newConnWatch(db.DB, o.log)
		g.Go(func() error { cw.run(runCtx, o.stopping); return nil })
	}
	if o.notify != nil {
		g.Go(func() error { o.notify.run(runCtx, o.stopping); return nil })
	}
	if !cfg.ProducerOnly {
		g.Go(func() error { return o.seq.Run(runCtx, o.stopping) })
		g.Go(func() error { return o.procs.Run(runCtx, o.stopping) })
		g.Go(func() error { return o.vac.Run(runCtx, o.stopping) })
		if wl, ok := d.(dialect.WakeupListener); ok && !cfg.NoWakeups {
			g.Go(func() error { o.listen(runCtx, wl); return nil })
		}
	}
	go func() {
		o.runErr = g.Wait()
		// The dialect's statements go once nothing can run them: the tasks
		// have ended and Stop was called (a producer-only outbox may have
		// no task at all). Each Start makes its own dialect, so they would
		// otherwise stay open on pooled connections for good.
		<-o.stopping
		if err := d.Release(); err != nil {
			o.log.Warn("closing prepared statements failed", slog.Any("error", err))
		}
		close(o.done)
	}()
	return o, nil
}

// schemaMissing turns a registration failure on tables that are absent or
// older than this release into ErrSchemaMissing naming the fixes: the
// driver's bare "relation does not exist" does not say what to do. The
// version is read only after a failure, so a healthy Start pays nothing.
func schemaMissing(ctx context.Context, d dialect.Dialect, err error) error {
	st, serr := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	if serr != nil || st.Current >= st.Latest {
		return err // not a schema problem, or one we cannot tell: the original says more
	}
	prefix := d.Tables().Prefix
	found := fmt.Sprintf("tables %s* do not exist", prefix)
	if st.Current > 0 {
		found = fmt.Sprintf("tables %s* are at schema version %d, this release needs %d", prefix, st.Current, st.Latest)
	}
	flag := ""
	if prefix != dialect.DefaultPrefix {
		flag = " --prefix " + prefix
	}
	return fmt.Errorf("%w: %s: run `seqbox migrate --dsn …%s`, or build the outbox with Migrate(true), "+
		"or apply seqbox.Migrations(%q) with bun/migrate (%w)", outbox.ErrSchemaMissing, found, flag, prefix, err)
}

// retryTransient runs fn until it succeeds, fails for good, or ctx ends
// (lifecycle.Retry, with the dialect's classification).
func retryTransient(ctx context.Context, d dialect.Base, log *slog.Logger, what string, fn func() error) error {
	return lifecycle.Retry(ctx, log, what, d.IsTransient, fn)
}

// Stop stops taking new work and waits for in-flight batches to finish.
// If ctx ends first, it cancels them and returns ctx's error at once, as
// http.Server.Shutdown does: their transactions roll back and their
// leases expire, so another process (or the next start) redelivers them
// and nothing is lost. A handler that ignores its context may still be
// running when Stop returns; Stopped is closed once every task has ended.
// Safe to call more than once.
func (o *Outbox) Stop(ctx context.Context) error {
	o.stopOnce.Do(func() { close(o.stopping) })
	select {
	case <-o.done:
		o.cancel()
		return o.runErr
	case <-ctx.Done():
		o.cancel()
		return ctx.Err()
	}
}

// Stopped is closed once every background task has ended and the
// statements the outbox prepared are closed: after Stop returned, or later
// when Stop's context ended before a handler did.
func (o *Outbox) Stopped() <-chan struct{} { return o.done }

// Dialect is the dialect the outbox runs on.
func (o *Outbox) Dialect() dialect.Dialect { return o.d }

// Notify wakes the processors of a partition this process works.
func (o *Outbox) Notify(partitionID int64) { o.procs.Notify(partitionID) }

// MarkDirty wakes the sequencer for partitions with new incoming rows.
func (o *Outbox) MarkDirty(partitionIDs []int64) {
	for _, pid := range partitionIDs {
		o.prio.MarkDirty(pid)
	}
}
