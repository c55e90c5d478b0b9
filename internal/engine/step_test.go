package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/processor"
)

// txFakeDialect is just enough of a dialect for stepTransactional: one
// partition whose processor row is always free, and updates recorded instead
// of written.
type txFakeDialect struct {
	baseFake
	state   dialect.ProcessorState
	msgs    []dialect.OutgoingMessage
	updates []dialect.ProcessorUpdateParams
}

func (f *txFakeDialect) RunInTx(ctx context.Context, fn func(context.Context, bun.Tx) error) error {
	// Updates made inside a transaction that fails are rolled back.
	n := len(f.updates)
	err := fn(ctx, bun.Tx{})
	if err != nil {
		f.updates = f.updates[:n]
	}
	return err
}

func (f *txFakeDialect) ProcessorLock(context.Context, *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	return dialect.ProcessorLockResult{Locked: true, State: f.state}, nil
}

func (f *txFakeDialect) OutgoingList(_ context.Context, p *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	var out []dialect.OutgoingMessage
	for _, m := range f.msgs {
		if m.Seq > p.AfterSeq && len(out) < p.Limit {
			out = append(out, m)
		}
	}
	return out, nil
}

func (f *txFakeDialect) ProcessorUpdate(_ context.Context, p *dialect.ProcessorUpdateParams) error {
	f.updates = append(f.updates, *p)
	return nil
}

// TestStepTransactionalAckAllThenError: a transactional batch handler that
// acks its only message and then fails is rolled back, and the failure must
// be recorded with a retry delay. It used to be retried at once without
// recording anything, forever (a busy loop that never dead-letters).
func TestStepTransactionalAckAllThenError(t *testing.T) {
	t.Parallel()
	fake := &txFakeDialect{
		state: dialect.ProcessorState{ProcessedSeq: 4},
		msgs:  []dialect.OutgoingMessage{{Seq: 5, PayloadType: "t", Payload: []byte("x")}},
	}
	boom := errors.New("boom")
	calls := 0
	h := processor.TransactionalBatch(func(_ context.Context, _ bun.Tx, b *processor.Batch) error {
		calls++
		b.Ack(len(b.Messages))
		return boom
	})
	p := NewPool(fake, PoolConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{testSpec("q", h, []int64{1}, processor.MaxAttempts(5), processor.Retry(time.Second, time.Minute))})
	tk := p.tasks[1]
	tk.batch = 1

	more, err := tk.stepTransactional(context.Background())
	require.NoError(t, err)
	require.False(t, more, "a failed head waits for its retry time")
	require.Equal(t, 1, calls)
	require.Len(t, fake.updates, 1, "the failure is recorded in its own transaction")
	u := fake.updates[0]
	require.Equal(t, int64(4), u.ProcessedSeq, "the rolled-back ack does not move the cursor")
	require.Equal(t, 1, u.Attempts)
	require.Equal(t, "boom", u.LastError)
	require.Greater(t, u.RetryAfter, time.Duration(0))
	require.Equal(t, u.RetryAfter, tk.retryWait)
	require.Equal(t, PoolCounters{Retried: 1}, p.Counters())
}

// TestStepTransactionalIsolatesFailure: a failure in a batch of several
// rolls back and retries at batch size 1 without counting an attempt.
func TestStepTransactionalIsolatesFailure(t *testing.T) {
	t.Parallel()
	fake := &txFakeDialect{
		state: dialect.ProcessorState{ProcessedSeq: 0},
		msgs:  []dialect.OutgoingMessage{{Seq: 1}, {Seq: 2}, {Seq: 3}},
	}
	h := processor.Transactional(func(_ context.Context, _ bun.Tx, d processor.Delivery) error {
		if d.Seq == 2 {
			return errors.New("boom")
		}
		return nil
	})
	p := NewPool(fake, PoolConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{testSpec("q", h, []int64{1})})
	tk := p.tasks[1]

	more, err := tk.stepTransactional(context.Background())
	require.NoError(t, err)
	require.True(t, more, "retry right away, one message at a time")
	require.Equal(t, 1, tk.batch)
	require.Empty(t, fake.updates, "the whole batch rolled back, message 1 included")
	require.Equal(t, PoolCounters{}, p.Counters())
}
