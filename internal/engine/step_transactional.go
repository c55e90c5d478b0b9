// The transactional step mode: lock the processor row, read, run the
// handler and ack in one transaction; a failure is recorded in a second one.

package engine

import (
	"context"
	"errors"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
)

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
