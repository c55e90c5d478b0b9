package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/seqbox/seqbox/internal/handling"
	"github.com/stretchr/testify/require"
)

// These tests are in-package because Batch.each and the handlers' run
// functions are unexported; they are what every per-message handler uses.

func newBatch(n int) *Batch {
	b := &Batch{Messages: make([]Delivery, n)}
	for i := range b.Messages {
		b.Messages[i].Seq = int64(i + 1)
	}
	return b
}

func TestBatchAck(t *testing.T) {
	t.Parallel()
	b := newBatch(3)
	require.Zero(t, b.Acked())
	b.Ack(2)
	require.Equal(t, 2, b.Acked())
	b.Ack(1) // acks never go backwards: the prefix is already done
	require.Equal(t, 2, b.Acked())
	b.Ack(-5)
	require.Equal(t, 2, b.Acked())
	b.Ack(10) // clamped to the batch
	require.Equal(t, 3, b.Acked())
	require.Empty(t, b.rejected)
}

func TestBatchReject(t *testing.T) {
	t.Parallel()
	b := newBatch(3)
	errA, errB := errors.New("a"), errors.New("b")
	b.Ack(1)
	b.Reject(errA) // dead-letters message 1, the first unacked
	require.Equal(t, 2, b.Acked())
	b.Reject(errB)
	require.Equal(t, 3, b.Acked())
	require.Equal(t, map[int]error{1: errA, 2: errB}, b.rejected)

	b.Reject(errors.New("nothing left")) // every message is done: a no-op
	require.Equal(t, 3, b.Acked())
	require.Len(t, b.rejected, 2)
}

func TestBatchEachStopsAtFirstError(t *testing.T) {
	t.Parallel()
	b := newBatch(5)
	b.Ack(1) // an earlier ack is skipped, not redelivered
	boom := errors.New("boom")
	var seen []int64
	err := b.each(context.Background(), func(_ context.Context, d Delivery) error {
		seen = append(seen, d.Seq)
		if d.Seq == 4 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, []int64{2, 3, 4}, seen, "order holds and nothing runs after the failure")
	require.Equal(t, 3, b.Acked(), "the prefix before the failure is acked")
}

func TestBatchEachAcksAll(t *testing.T) {
	t.Parallel()
	b := newBatch(3)
	calls := 0
	require.NoError(t, b.each(context.Background(), func(context.Context, Delivery) error { calls++; return nil }))
	require.Equal(t, 3, calls)
	require.Equal(t, 3, b.Acked())
}

func TestBatchEachStopsOnCancel(t *testing.T) {
	t.Parallel()
	b := newBatch(3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := b.each(ctx, func(context.Context, Delivery) error {
		calls++
		cancel() // e.g. the lease deadline passed while handling message 1
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, calls)
	require.Equal(t, 1, b.Acked(), "the message that completed stays acked")
}

func TestHandlerModes(t *testing.T) {
	t.Parallel()
	require.Equal(t, ModeLeased, Leased(nil).Mode())
	require.Equal(t, ModeLeased, LeasedBatch(nil).Mode())
	require.Equal(t, ModeTransactional, Transactional(nil).Mode())
	require.Equal(t, ModeTransactional, TransactionalBatch(nil).Mode())
	require.Equal(t, "leased", ModeLeased.String())
	require.Equal(t, "transactional", ModeTransactional.String())
	require.Equal(t, "invalid", Mode(0).String())
}

// TestLeasedHandlerRunsEach checks the per-message constructor goes through
// each, so its order and partial-ack rules hold.
func TestLeasedHandlerRunsEach(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	h := Leased(func(_ context.Context, d Delivery) error {
		if d.Seq == 2 {
			return boom
		}
		return nil
	})
	res := h.(handling.Handler).Bind(nil).Run(context.Background(), &handling.Call{Queue: "q", Messages: []handling.Message{{Seq: 1}, {Seq: 2}, {Seq: 3}}})
	require.ErrorIs(t, res.Err, boom)
	require.Equal(t, 1, res.Acked)
}
