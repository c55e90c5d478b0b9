package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/processor"
)

// leaseFakeDialect serves one partition's messages through leases and
// records every call, so the step logic can be checked without a database.
type leaseFakeDialect struct {
	baseFake
	msgs      []dialect.OutgoingMessage
	processed int64
	leases    int // ProcessorLease calls
	ackLeases int // ProcessorAckLease calls
	acks      []dialect.ProcessorUpdateParams
}

func (f *leaseFakeDialect) batch(limit int) []dialect.OutgoingMessage {
	var out []dialect.OutgoingMessage
	for _, m := range f.msgs {
		if m.Seq > f.processed && len(out) < limit {
			out = append(out, m)
		}
	}
	return out
}

func (f *leaseFakeDialect) ProcessorLease(_ context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	f.leases++
	msgs := f.batch(p.Limit)
	if len(msgs) == 0 {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return dialect.ProcessorLeaseResult{Leased: true, State: dialect.ProcessorState{ProcessedSeq: f.processed}, Messages: msgs}, nil
}

func (f *leaseFakeDialect) ProcessorAckLease(_ context.Context, p *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	ack, next := p.Ack, p.Next
	f.ackLeases++
	f.processed = ack.ProcessedSeq
	msgs := f.batch(next.Limit)
	if len(msgs) == 0 {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return dialect.ProcessorLeaseResult{Leased: true, State: dialect.ProcessorState{ProcessedSeq: f.processed}, Messages: msgs}, nil
}

func (f *leaseFakeDialect) ProcessorAck(_ context.Context, p *dialect.ProcessorUpdateParams) error {
	f.acks = append(f.acks, *p)
	f.processed = p.ProcessedSeq
	return nil
}

// TestStepLeasedChainsLeases: while a partition has work, each clean ack
// hands the next batch to the following step, which then takes no lease of
// its own; the chain ends when the ack finds nothing more.
func TestStepLeasedChainsLeases(t *testing.T) {
	t.Parallel()
	fake := &leaseFakeDialect{}
	for seq := int64(1); seq <= 5; seq++ {
		fake.msgs = append(fake.msgs, dialect.OutgoingMessage{Seq: seq})
	}
	var got []int64
	h := processor.LeasedBatch(func(_ context.Context, b *processor.Batch) error {
		for _, m := range b.Messages {
			got = append(got, m.Seq)
		}
		return nil
	})
	p := NewPool(fake, PoolConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{testSpec("q", h, []int64{1}, processor.BatchSize(2))})
	tk := p.tasks[1]
	ctx := context.Background()

	for range 2 { // [1 2] then [3 4], each ack leasing the next batch
		more, err := tk.stepLeased(ctx)
		require.NoError(t, err)
		require.True(t, more, "the ack leased the next batch")
		require.NotNil(t, tk.pending)
	}
	more, err := tk.stepLeased(ctx) // [5], whose ack finds nothing more
	require.NoError(t, err)
	require.False(t, more, "nothing left after seq 5")
	require.Nil(t, tk.pending)

	require.Equal(t, []int64{1, 2, 3, 4, 5}, got)
	require.Equal(t, 1, fake.leases, "only the first batch took a lease of its own")
	require.Equal(t, 3, fake.ackLeases)
	require.Empty(t, fake.acks)
	require.Equal(t, PoolCounters{Delivered: 5}, p.Counters())
}

// TestReleasePendingRestoresAttempts: a lease taken by an ack but never
// worked (the pool stopped) is given back with the head's earlier count.
func TestReleasePendingRestoresAttempts(t *testing.T) {
	t.Parallel()
	fake := &leaseFakeDialect{}
	p := NewPool(fake, PoolConfig{Owner: "me", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{testSpec("q", processor.Leased(func(context.Context, processor.Delivery) error { return nil }), []int64{1})})
	tk := p.tasks[1]
	tk.pending = &pendingLease{lease: dialect.ProcessorLeaseResult{Leased: true,
		State: dialect.ProcessorState{ProcessedSeq: 7, Attempts: 2}, Messages: []dialect.OutgoingMessage{{Seq: 8}}}}

	tk.releasePending(context.Background())
	require.Nil(t, tk.pending)
	require.Len(t, fake.acks, 1)
	a := fake.acks[0]
	require.Equal(t, "me", a.Owner, "guarded by our lease")
	require.Equal(t, int64(7), a.ProcessedSeq, "the cursor does not move")
	require.Equal(t, 2, a.Attempts, "the count from before the lease")
	require.Zero(t, a.RetryAfter)

	tk.releasePending(context.Background()) // nothing pending: no call
	require.Len(t, fake.acks, 1)
}

// TestStalePendingLeaseIsGivenBack: a lease taken by an ack that then waited
// past the handler's deadline is released, and the step leases afresh.
func TestStalePendingLeaseIsGivenBack(t *testing.T) {
	t.Parallel()
	fake := &leaseFakeDialect{msgs: []dialect.OutgoingMessage{{Seq: 1}}}
	var got []int64
	p := NewPool(fake, PoolConfig{Owner: "me", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{testSpec("q", processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		got = append(got, d.Seq)
		return nil
	}), []int64{1})})
	tk := p.tasks[1]
	tk.pending = &pendingLease{at: time.Now().Add(-time.Hour), limit: 1, lease: dialect.ProcessorLeaseResult{Leased: true,
		State: dialect.ProcessorState{ProcessedSeq: 0}, Messages: []dialect.OutgoingMessage{{Seq: 1}}}}

	_, err := tk.stepLeased(context.Background())
	require.NoError(t, err)
	require.Len(t, fake.acks, 1, "the stale lease was given back")
	require.Equal(t, 1, fake.leases, "and a fresh one taken")
	require.Equal(t, []int64{1}, got, "the handler ran under the fresh lease")
}

// refusingDialect refuses, once, any outcome that carries an error text
// other than the fixed note, as a database refusing a value would.
type refusingDialect struct {
	leaseFakeDialect
	refused int
}

var (
	errRefused      = errors.New("invalid byte sequence")
	errDisconnected = errors.New("unexpected EOF")
)

func (f *refusingDialect) IsRetryable(error) bool { return false }

// IsTransient reports errDisconnected, as a dialect reports a connection
// that dropped.
func (f *refusingDialect) IsTransient(err error) bool { return errors.Is(err, errDisconnected) }

func (f *refusingDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	if p.LastError != "" && p.LastError != unrecordedErrorText {
		f.refused++
		return errRefused
	}
	return f.leaseFakeDialect.ProcessorAck(ctx, p)
}

// TestRefusedFailureIsRecordedWithoutText: when the database refuses a
// failure's error text, the failure is recorded anyway (attempts counted,
// retry scheduled) with a fixed note instead of the text, so MaxAttempts
// still ends a failing head.
func TestRefusedFailureIsRecordedWithoutText(t *testing.T) {
	t.Parallel()
	fake := &refusingDialect{leaseFakeDialect: leaseFakeDialect{msgs: []dialect.OutgoingMessage{{Seq: 1}}}}
	p := NewPool(fake, PoolConfig{Owner: "me", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{
		testSpec("q", processor.Leased(func(context.Context, processor.Delivery) error { return errors.New("unstorable") }), []int64{1}),
	})
	tk := p.tasks[1]
	_, err := tk.stepLeased(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, fake.refused)
	require.Len(t, fake.acks, 1)
	require.Equal(t, unrecordedErrorText, fake.acks[0].LastError)
	require.Equal(t, 1, fake.acks[0].Attempts, "the failure is counted")
	require.Positive(t, fake.acks[0].RetryAfter)
}

// disconnectedDialect loses its connection on the first ack.
type disconnectedDialect struct {
	refusingDialect
	dropped int
}

func (f *disconnectedDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	if f.dropped == 0 {
		f.dropped++
		return errDisconnected
	}
	return f.leaseFakeDialect.ProcessorAck(ctx, p)
}

// TestDisconnectIsNoRefusal: a failure whose record meets a lost
// connection (a failover) is not recorded again without its error text: the
// step fails, as for a conflict, and the text is kept for the next try.
func TestDisconnectIsNoRefusal(t *testing.T) {
	t.Parallel()
	fake := &disconnectedDialect{refusingDialect: refusingDialect{leaseFakeDialect: leaseFakeDialect{msgs: []dialect.OutgoingMessage{{Seq: 1}}}}}
	p := NewPool(fake, PoolConfig{Owner: "me", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []QueueSpec{
		testSpec("q", processor.Leased(func(context.Context, processor.Delivery) error { return errors.New("payment service down") }), []int64{1}),
	})
	tk := p.tasks[1]
	_, err := tk.stepLeased(context.Background())
	require.ErrorIs(t, err, errDisconnected)
	require.Equal(t, 1, fake.dropped)
	require.Empty(t, fake.acks, "nothing recorded in place of the failure")
}
