// The leased step mode: lease and read, run the handler outside any
// transaction, ack guarded by the lease (the next lease taken with a clean
// ack), grouped with other partitions' where the store can.

package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
)

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
