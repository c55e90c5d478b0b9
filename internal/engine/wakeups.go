package engine

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// notifier tells other processes which partitions this one enqueued to or
// sequenced (PostgreSQL NOTIFY; docs/ARCHITECTURE.md, "Wake-ups across
// processes"). It sends outside every caller's transaction, one statement
// at a time: what is added while one is sent goes in the next, so a busy
// process sends one statement per round trip, not one per enqueue. A lost
// notification costs latency only: polling finds the work.
type notifier struct {
	d    dialect.WakeupNotifier
	self string
	log  *slog.Logger

	mu                  sync.Mutex
	incoming, sequenced map[int64]struct{}
	wake                chan struct{}
}

func newNotifier(d dialect.WakeupNotifier, self string, log *slog.Logger) *notifier {
	return &notifier{d: d, self: self, log: log, incoming: map[int64]struct{}{}, sequenced: map[int64]struct{}{},
		wake: make(chan struct{}, 1)}
}

// add queues partitions to announce; a nil notifier (no wake-ups) ignores it.
func (n *notifier) add(incoming, sequenced []int64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	for _, id := range incoming {
		n.incoming[id] = struct{}{}
	}
	for _, id := range sequenced {
		n.sequenced[id] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take empties the queue.
func (n *notifier) take() (incoming, sequenced []int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	incoming, sequenced = slices.Collect(maps.Keys(n.incoming)), slices.Collect(maps.Keys(n.sequenced))
	clear(n.incoming)
	clear(n.sequenced)
	return incoming, sequenced
}

// run sends until stopping closes, then sends what is left, briefly.
func (n *notifier) run(ctx context.Context, stopping <-chan struct{}) {
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	for {
		select {
		case <-n.wake:
			n.send(waitCtx)
		case <-waitCtx.Done():
			last, cancelLast := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			n.send(last)
			cancelLast()
			return
		}
	}
}

func (n *notifier) send(ctx context.Context) {
	incoming, sequenced := n.take()
	if len(incoming)+len(sequenced) == 0 {
		return
	}
	err := lifecycle.Safely(func() error { return n.d.NotifyWakeups(ctx, n.self, incoming, sequenced) })
	if err != nil && ctx.Err() == nil {
		n.log.Debug("wake-up notification not sent; other processes find the work by polling", slog.Any("error", err))
	}
}

// listen wakes this process's sequencer and processors for work other
// processes commit, until Stop. A notification of incoming rows may come
// before the enqueuing transaction commits (the producer cannot know when
// a caller-owned one does), so it makes the partition "maybe dirty":
// probed now and again for MaybeDirtyWindow.
func (o *Outbox) listen(ctx context.Context, wl dialect.WakeupListener) {
	ctx, cancel := lifecycle.UntilStopping(ctx, o.stopping)
	defer cancel()
	err := wl.ListenWakeups(ctx, o.cfg.Processor.Owner, dialect.Wakeups{
		Incoming: func(ids []int64) {
			if ids == nil {
				o.reconcileAsync(ctx)
				return
			}
			for _, id := range ids {
				o.prio.MarkMaybeDirty(id)
			}
		},
		Sequenced: func(ids []int64) {
			if ids == nil {
				o.procs.NotifyAll()
				return
			}
			for _, id := range ids {
				o.procs.Notify(id)
			}
		},
		// Whatever committed while nobody listened is found now.
		Listening: func() {
			o.reconcileAsync(ctx)
			o.procs.NotifyAll()
		},
	})
	if err != nil {
		// The reason says how to turn them on (postgres.WithListener).
		o.log.Info("wake-ups from other processes are off; their work is found by polling",
			slog.Duration("poll_interval", o.cfg.Processor.PollInterval), slog.Any("reason", err))
	}
}

// reconcileAsync scans for incoming rows now, without blocking the
// listener. The scan is one of the tasks, so Stopped waits for it; ctx ends
// with the listener, at Stop. Only the listener's callbacks call it, while
// the listener task runs, so the group is never joined after its Wait.
func (o *Outbox) reconcileAsync(ctx context.Context) {
	o.tasks.Go(func() error {
		if err := o.seq.Reconcile(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("reconcile after a wake-up gap failed; the periodic scan will retry", slog.Any("error", err))
		}
		return nil
	})
}
