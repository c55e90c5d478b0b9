package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/processor"
)

// decide is the whole retry / dead-letter policy in one pure function; these
// tests pin it without a database. decide never touches the pool, so the
// task has none.

const (
	decidePartitionID = int64(7)
	decideOwner       = "me"
)

var errBoom = errors.New("boom")

func decideTask(maxAttempts int) *task {
	return &task{
		id: decidePartitionID, queue: "q",
		opts: handling.Options{MaxAttempts: maxAttempts, RetryBase: time.Second, RetryMax: 10 * time.Second},
	}
}

// decideInput is a batch of three messages after cursor 10 (seqs 11..13).
func decideInput(attempts int) (dialect.ProcessorState, []dialect.OutgoingMessage, *batchRes) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := make([]dialect.OutgoingMessage, 3)
	for i := range msgs {
		msgs[i] = dialect.OutgoingMessage{
			Seq: int64(11 + i), ID: dialect.MessageID{byte(i + 1)}, PayloadType: "t",
			Payload: []byte{'p', byte('0' + i)}, Headers: []byte(`{"k":"v"}`), CreatedAt: created,
		}
	}
	return dialect.ProcessorState{ProcessedSeq: 10, Attempts: attempts}, msgs, &batchRes{n: len(msgs)}
}

func TestDecideSuccess(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), nil)
	require.Equal(t, outcome{
		update: &dialect.ProcessorUpdateParams{PartitionID: decidePartitionID, Owner: decideOwner, ProcessedSeq: 13},
		acked:  3,
	}, o, "nil acks the whole batch and clears the head's attempts")
}

func TestDecideHeadFails(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), errBoom)

	require.True(t, o.failed)
	require.Same(t, errBoom, o.failure)
	require.Zero(t, o.acked)
	require.Zero(t, o.dead)
	u := o.update
	require.Equal(t, int64(10), u.ProcessedSeq, "cursor unchanged")
	require.Equal(t, 3, u.Attempts, "the head's count continues: 2 earlier + this one")
	require.Equal(t, "boom", u.LastError)
	require.Empty(t, u.DeadLetters)
	require.Equal(t, decideOwner, u.Owner)
	// Full jitter over base*2^(3-1) = 4s, never zero (that would mean no retry time).
	require.Greater(t, u.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, u.RetryAfter, lifecycle.Backoff(3, time.Second, 10*time.Second))
}

func TestDecideFailsAfterPartialAck(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(4)
	b.Ack(2)
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), errBoom)

	require.True(t, o.failed)
	require.Equal(t, 2, o.acked)
	u := o.update
	require.Equal(t, int64(12), u.ProcessedSeq, "cursor past the acked prefix")
	require.Equal(t, 2, o.acked)
	require.Equal(t, 1, u.Attempts, "a new head starts counting at one, whatever the old head had")
	require.Equal(t, "boom", u.LastError)
	require.Greater(t, u.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, u.RetryAfter, time.Second, "first failure: at most RetryBase")
}

func TestDecideMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	o := decideTask(3).decide(state, decideOwner, msgs, b.res(), errBoom)

	require.False(t, o.failed, "the partition moves on")
	require.Same(t, errBoom, o.failure, "kept for the log")
	require.Equal(t, 1, o.acked)
	require.Equal(t, 1, o.dead)
	u := o.update
	require.Equal(t, int64(11), u.ProcessedSeq, "cursor past the dead head only")
	require.Equal(t, 1, o.acked)
	require.Zero(t, u.Attempts)
	require.Empty(t, u.LastError)
	require.Zero(t, u.RetryAfter)
	require.Len(t, u.DeadLetters, 1)
	dl := u.DeadLetters[0]
	require.Equal(t, dialect.DeadLetter{
		PartitionID: decidePartitionID, Seq: 11, MessageID: msgs[0].ID, PayloadType: "t",
		Payload: msgs[0].Payload, Headers: msgs[0].Headers, CreatedAt: msgs[0].CreatedAt,
		LastError: "after 3 attempts: boom", Attempts: 3,
	}, dl)
}

func TestDecideMaxAttemptsAfterPartialAck(t *testing.T) {
	t.Parallel()
	// With MaxAttempts 1 a new head that fails once is dead-lettered at once.
	state, msgs, b := decideInput(0)
	b.Ack(1)
	o := decideTask(1).decide(state, decideOwner, msgs, b.res(), errBoom)
	require.False(t, o.failed)
	require.Equal(t, 2, o.acked)
	require.Equal(t, int64(12), o.update.ProcessedSeq)
	require.Len(t, o.update.DeadLetters, 1)
	require.Equal(t, int64(12), o.update.DeadLetters[0].Seq)
	require.Equal(t, 1, o.update.DeadLetters[0].Attempts)
}

func TestDecideRejectReturned(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	cause := errors.New("cannot parse")
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), processor.Reject(cause))

	require.False(t, o.failed)
	require.NoError(t, o.failure)
	require.Equal(t, 1, o.acked)
	require.Equal(t, 1, o.dead)
	u := o.update
	require.Equal(t, int64(11), u.ProcessedSeq, "cursor past the rejected head; the rest is redelivered")
	require.Equal(t, 1, o.acked)
	require.Zero(t, u.Attempts)
	require.Empty(t, u.LastError, "a rejection is not a failure of the next head")
	require.Zero(t, u.RetryAfter)
	require.Len(t, u.DeadLetters, 1)
	require.Equal(t, int64(11), u.DeadLetters[0].Seq)
	require.Equal(t, msgs[0].ID, u.DeadLetters[0].MessageID)
	require.Equal(t, "seqbox: message rejected: cannot parse", u.DeadLetters[0].LastError)
	require.Equal(t, 3, u.DeadLetters[0].Attempts, "2 earlier deliveries + this one")
}

func TestDecideRejectReturnedAfterPartialAck(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	b.Ack(1)
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), processor.Reject(nil))
	require.False(t, o.failed)
	require.Equal(t, 2, o.acked)
	require.Equal(t, int64(12), o.update.ProcessedSeq)
	require.Len(t, o.update.DeadLetters, 1)
	require.Equal(t, int64(12), o.update.DeadLetters[0].Seq, "the first unacked message, not the head")
	require.Equal(t, 1, o.update.DeadLetters[0].Attempts, "it was never the head before")
}

func TestDecideBatchRejectThenNil(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	cause := errors.New("bad row")
	b.Ack(1)
	b.Reject(cause)
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), nil)

	require.False(t, o.failed)
	require.Equal(t, 3, o.acked)
	require.Equal(t, 1, o.dead)
	u := o.update
	require.Equal(t, int64(13), u.ProcessedSeq, "cursor at the end of the batch")
	require.Equal(t, 3, o.acked)
	require.Len(t, u.DeadLetters, 1)
	require.Equal(t, int64(12), u.DeadLetters[0].Seq, "the message at the rejected index")
	require.Equal(t, msgs[1].ID, u.DeadLetters[0].MessageID)
	require.Equal(t, "bad row", u.DeadLetters[0].LastError)
	require.Equal(t, 1, u.DeadLetters[0].Attempts, "delivered once, and not as the head")
}

func TestDecideBatchRejectHeadAttempts(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(2)
	b.Reject(errors.New("bad head"))
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), nil)
	require.Len(t, o.update.DeadLetters, 1)
	require.Equal(t, int64(11), o.update.DeadLetters[0].Seq)
	require.Equal(t, 3, o.update.DeadLetters[0].Attempts, "2 earlier deliveries + this one, as for a returned Reject")
}

func TestDecideBatchRejectThenError(t *testing.T) {
	t.Parallel()
	// The rejection is kept (leased mode) and the next message is retried.
	state, msgs, b := decideInput(0)
	b.Reject(errors.New("bad head"))
	o := decideTask(5).decide(state, decideOwner, msgs, b.res(), errBoom)
	require.True(t, o.failed)
	require.Equal(t, 1, o.acked)
	require.Equal(t, 1, o.dead)
	require.Equal(t, int64(11), o.update.ProcessedSeq)
	require.Equal(t, 1, o.update.Attempts)
	require.Len(t, o.update.DeadLetters, 1)
}

func TestDecideMaxAttemptsZeroNeverDeadLetters(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(1000)
	o := decideTask(0).decide(state, decideOwner, msgs, b.res(), errBoom)
	require.True(t, o.failed)
	require.Zero(t, o.dead)
	require.Empty(t, o.update.DeadLetters)
	require.Equal(t, int64(10), o.update.ProcessedSeq)
	require.Equal(t, 1001, o.update.Attempts)
	require.Greater(t, o.update.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, o.update.RetryAfter, 10*time.Second, "capped at RetryMax")
}

// TestDecideErrorAfterAckingAll: a batch handler that acked every message and
// still returned an error leaves nothing to retry or blame. This used to
// index past the batch (a panic with MaxAttempts 1, so the batch was
// redelivered forever) or charge a failure to the next, undelivered message.
func TestDecideErrorAfterAckingAll(t *testing.T) {
	t.Parallel()
	for _, herr := range []error{errBoom, processor.Reject(errBoom)} {
		for _, maxAttempts := range []int{0, 1, 5} {
			state, msgs, b := decideInput(0)
			b.Ack(len(msgs))
			var o outcome
			require.NotPanics(t, func() { o = decideTask(maxAttempts).decide(state, decideOwner, msgs, b.res(), herr) })
			require.False(t, o.failed, "%v, MaxAttempts %d", herr, maxAttempts)
			require.Equal(t, 3, o.acked)
			require.Zero(t, o.dead)
			require.Equal(t, &dialect.ProcessorUpdateParams{
				PartitionID: decidePartitionID, Owner: decideOwner, ProcessedSeq: 13,
			}, o.update, "%v, MaxAttempts %d", herr, maxAttempts)
		}
	}
}

// TestDecideTransactionalOwner: transactional mode passes no owner, so the
// update is not guarded by a lease.
func TestDecideTransactionalOwner(t *testing.T) {
	t.Parallel()
	state, msgs, b := decideInput(0)
	o := decideTask(5).decide(state, "", msgs, b.res(), nil)
	require.Empty(t, o.update.Owner)
}

// TestDecidePark: under processor.Park, the head that exhausts MaxAttempts stays:
// the cursor stops before it, its count and error are kept, no retry time
// is set and no dead letter is written; what was acked before it advances.
func TestDecidePark(t *testing.T) {
	t.Parallel()
	task := decideTask(1)
	task.opts.OnFailure = handling.Park
	state, msgs, b := decideInput(0)
	b.Ack(1)
	o := task.decide(state, decideOwner, msgs, b.res(), errBoom)
	require.True(t, o.parked)
	require.False(t, o.failed)
	require.Equal(t, 1, o.acked)
	u := o.update
	require.True(t, u.Park)
	require.False(t, u.Clean())
	require.Equal(t, int64(11), u.ProcessedSeq, "the acked message advances; the failing one is the head")
	require.Equal(t, 1, u.Attempts, "a new head starts at one")
	require.Zero(t, u.RetryAfter)
	require.Empty(t, u.DeadLetters)

	task = decideTask(3)
	task.opts.OnFailure = handling.Park
	state, msgs, b = decideInput(1)
	o = task.decide(state, decideOwner, msgs, b.res(), errBoom)
	require.False(t, o.parked, "two failures of three: retried")
	require.True(t, o.failed)
	state, msgs, b = decideInput(2)
	o = task.decide(state, decideOwner, msgs, b.res(), errBoom)
	require.True(t, o.parked)
	require.Equal(t, int64(10), o.update.ProcessedSeq)
	require.Equal(t, 3, o.update.Attempts)
	require.Equal(t, "boom", o.update.LastError)

	// A rejection is dead-lettered under processor.Park too: the handler has said so.
	state, msgs, b = decideInput(0)
	o = task.decide(state, decideOwner, msgs, b.res(), processor.Reject(errBoom))
	require.False(t, o.parked)
	require.Len(t, o.update.DeadLetters, 1)
}

// batchRes acks and rejects as a processor.Batch does and gives the
// handler call's result.
type batchRes struct {
	n        int
	acked    int
	rejected map[int]error
}

func (b *batchRes) Ack(n int) { b.acked = max(b.acked, min(n, b.n)) }

func (b *batchRes) Reject(err error) {
	if b.acked >= b.n {
		return
	}
	if b.rejected == nil {
		b.rejected = map[int]error{}
	}
	b.rejected[b.acked] = err
	b.acked++
}

func (b *batchRes) res() handling.Result {
	return handling.Result{Acked: b.acked, Rejected: b.rejected}
}
