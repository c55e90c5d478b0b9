// A partition's task: its wake-up loop, one step (a batch) at a time, and
// the helpers both step modes share (the handler call, giving a lease back,
// passing over tombstones).

package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

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

func (t *task) apply(ctx context.Context, u *dialect.ProcessorUpdateParams) error {
	return t.pool.d.ProcessorAck(ctx, u)
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
