// Deciding a batch's outcome from the handler's result: how far the
// cursor moves, which messages are dead-lettered, and whether the head is
// retried or parks the partition.

package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

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
