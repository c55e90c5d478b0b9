package processor_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/processor"
)

func TestRejectError(t *testing.T) {
	t.Parallel()
	cause := errors.New("cannot parse")
	err := fmt.Errorf("handler: %w", processor.Reject(cause))

	require.ErrorIs(t, err, processor.ErrRejected)
	require.ErrorIs(t, err, cause, "the cause stays reachable")
	var rerr *processor.RejectError
	require.ErrorAs(t, err, &rerr)
	require.Same(t, cause, rerr.Unwrap())
	require.Equal(t, "seqbox: message rejected: cannot parse", rerr.Error())

	require.ErrorIs(t, processor.Reject(nil), processor.ErrRejected)
	require.Equal(t, "seqbox: message rejected", processor.Reject(nil).Error())
	require.NotErrorIs(t, cause, processor.ErrRejected, "a plain error is retried, not rejected")
}

func TestQueueOptionsValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, processor.DefaultQueueOptions().Validate())

	tests := []struct {
		name string
		edit func(o *processor.QueueOptions)
	}{
		{"batch size zero", func(o *processor.QueueOptions) { o.BatchSize = 0 }},
		{"batch size too large", func(o *processor.QueueOptions) { o.BatchSize = 10001 }},
		{"zero retry base", func(o *processor.QueueOptions) { o.RetryBase = 0 }},
		{"negative retry base", func(o *processor.QueueOptions) { o.RetryBase = -time.Second }},
		{"retry max below base", func(o *processor.QueueOptions) { o.RetryBase, o.RetryMax = time.Minute, time.Second }},
		{"lease too short", func(o *processor.QueueOptions) { o.Lease, o.LeaseHeadroom = 99*time.Millisecond, time.Millisecond }},
		{"zero headroom", func(o *processor.QueueOptions) { o.LeaseHeadroom = 0 }},
		{"headroom equals lease", func(o *processor.QueueOptions) { o.LeaseHeadroom = o.Lease }},
		{"headroom above lease", func(o *processor.QueueOptions) { o.LeaseHeadroom = o.Lease + time.Second }},
		{"zero handler timeout", func(o *processor.QueueOptions) { o.HandlerTimeout = 0 }},
		{"negative handler timeout", func(o *processor.QueueOptions) { o.HandlerTimeout = -time.Second }},
		{"unknown failure policy", func(o *processor.QueueOptions) { o.OnFailure = processor.FailurePolicy(7) }},
		{"zero dedup window", func(o *processor.QueueOptions) { o.DedupWindow = 0 }},
		{"negative dedup window", func(o *processor.QueueOptions) { o.DedupWindow = -time.Hour }},
		{"dedup window too long", func(o *processor.QueueOptions) { o.DedupWindow = processor.DedupWindowMax + 1 }},
		{"park that never gives up", func(o *processor.QueueOptions) {
			o.OnFailure, o.MaxAttempts = processor.Park, processor.MaxAttemptsNever
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := processor.DefaultQueueOptions()
			tt.edit(&o)
			require.ErrorIs(t, o.Validate(), processor.ErrInvalidOptions)
		})
	}
}

// TestQueueOptionsValidateBoundaries checks the limits themselves are allowed.
func TestQueueOptionsValidateBoundaries(t *testing.T) {
	t.Parallel()
	o := processor.NewQueueOptions(
		processor.BatchSize(10000),
		processor.MaxAttempts(processor.MaxAttemptsNever),
		processor.Retry(time.Millisecond, time.Millisecond),
		processor.Lease(100*time.Millisecond, 99*time.Millisecond),
	)
	require.NoError(t, o.Validate())
	require.NoError(t, processor.NewQueueOptions(processor.BatchSize(1)).Validate())
	require.NoError(t, processor.NewQueueOptions(processor.OnFailure(processor.Park), processor.MaxAttempts(1)).Validate())
	require.Equal(t, "park", processor.Park.String())
	require.Equal(t, "dead-letter", processor.DeadLetter.String())
}

func TestNewQueueOptions(t *testing.T) {
	t.Parallel()
	require.Equal(t, processor.DefaultQueueOptions(), processor.NewQueueOptions())
	require.Equal(t, processor.QueueOptions{
		BatchSize: 100, MaxAttempts: 10, RetryBase: time.Second, RetryMax: 5 * time.Minute,
		Lease: 30 * time.Second, LeaseHeadroom: 2 * time.Second, HandlerTimeout: 30 * time.Second,
		DedupWindow: 24 * time.Hour,
	}, processor.DefaultQueueOptions(), "documented defaults")

	got := processor.NewQueueOptions(
		processor.BatchSize(7),
		processor.MaxAttempts(3),
		processor.Retry(10*time.Millisecond, time.Second),
		processor.Lease(time.Minute, 5*time.Second),
		processor.HandlerTimeout(9*time.Second),
		processor.DedupWindow(time.Minute),
		processor.BatchSize(8), // later options win
	)
	require.Equal(t, processor.QueueOptions{
		BatchSize: 8, MaxAttempts: 3, RetryBase: 10 * time.Millisecond, RetryMax: time.Second,
		Lease: time.Minute, LeaseHeadroom: 5 * time.Second, HandlerTimeout: 9 * time.Second, DedupWindow: time.Minute,
	}, got)

	// Options left out keep their defaults; zero means default, nil is skipped.
	only := processor.NewQueueOptions(processor.MaxAttempts(processor.MaxAttemptsNever), nil)
	want := processor.DefaultQueueOptions()
	want.MaxAttempts = processor.MaxAttemptsNever
	require.Equal(t, want, only)
	require.Equal(t, processor.DefaultQueueOptions(), processor.NewQueueOptions(processor.MaxAttempts(0), processor.BatchSize(0)))
	require.Equal(t, processor.DefaultQueueOptions(), processor.QueueOptions{}.WithDefaults())
}
