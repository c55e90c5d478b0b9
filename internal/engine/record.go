// Recording an outcome: the counters, the log lines and the batch size,
// and the fallback that stores a failure without its error text when the
// database refuses the text.

package engine

import (
	"context"
	"errors"
	"log/slog"

	"github.com/seqbox/seqbox/dialect"
)

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

// recordOutcome applies u (or, with u nil, an outcome apply decides
// itself) and, should the database refuse it for a reason other than a
// conflict, a lost connection, a lost lease or the end of ctx, applies it
// once more with every error text replaced by a fixed note. The error text
// is the one part of an outcome that comes from outside, and a failure that
// cannot be recorded would be retried for ever without MaxAttempts ever
// counting it. The first refusal is logged: it is a seqbox bug to report. A
// lost connection (a server restarting, a failover: docs/FAILOVER.md) is no
// refusal: the step fails and the batch comes again, its text intact.
func (t *task) recordOutcome(ctx context.Context, u *dialect.ProcessorUpdateParams,
	apply func(context.Context, *dialect.ProcessorUpdateParams) error) error {
	err := apply(ctx, u)
	if err == nil || ctx.Err() != nil || errors.Is(err, dialect.ErrLeaseLost) || t.pool.d.IsTransient(err) ||
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
