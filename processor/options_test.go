package processor

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/handling"
)

func TestRejectError(t *testing.T) {
	t.Parallel()
	cause := errors.New("cannot parse")
	err := fmt.Errorf("handler: %w", Reject(cause))

	require.ErrorIs(t, err, ErrRejected)
	require.ErrorIs(t, err, cause, "the cause stays reachable")
	var rerr *RejectError
	require.ErrorAs(t, err, &rerr)
	require.Same(t, cause, rerr.Unwrap())
	require.Equal(t, "seqbox: message rejected: cannot parse", rerr.Error())
	require.Equal(t, "seqbox: message rejected: x", Reject(errors.New("seqbox: x")).Error(), "the prefix is said once")

	require.ErrorIs(t, Reject(nil), ErrRejected)
	require.Equal(t, "seqbox: message rejected", Reject(nil).Error())
	require.NotErrorIs(t, cause, ErrRejected, "a plain error is retried, not rejected")
}

// resolve is what Start makes of a queue's own options.
func resolve(opts ...QueueOption) handling.Options {
	own := make([]handling.Option, len(opts))
	for i, o := range opts {
		own[i] = o.(handling.Option)
	}
	return handling.Resolve(nil, own)
}

func TestQueueOptionsDefaults(t *testing.T) {
	t.Parallel()
	got := resolve()
	require.Equal(t, handling.Options{
		BatchSize: 100, MaxAttempts: 10, RetryBase: time.Second, RetryMax: 5 * time.Minute,
		Lease: 30 * time.Second, LeaseHeadroom: 2 * time.Second, HandlerTimeout: 30 * time.Second,
		DedupWindow: 24 * time.Hour,
	}, got, "documented defaults")
	require.Empty(t, got.Validate("Queue(q)", true, false))

	got = resolve(BatchSize(7), MaxAttempts(3), Retry(10*time.Millisecond, time.Second),
		Lease(time.Minute, 5*time.Second), DedupWindow(time.Minute), BatchSize(8)) // later options win
	require.Equal(t, 8, got.BatchSize)
	require.Equal(t, 3, got.MaxAttempts)
	require.Equal(t, time.Minute, got.Lease)
	require.Equal(t, 5*time.Second, got.LeaseHeadroom)
	require.Equal(t, time.Minute, got.DedupWindow)
	require.Equal(t, 100, resolve(BatchSize(0)).BatchSize, "zero means the default")
}

func TestQueueOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opt  QueueOption
	}{
		{"batch size too large", BatchSize(10001)},
		{"negative batch size", BatchSize(-1)},
		{"negative retry base", Retry(-time.Second, time.Second)},
		{"retry max below base", Retry(time.Minute, time.Second)},
		{"lease too short", Lease(99*time.Millisecond, time.Millisecond)},
		{"headroom equals lease", Lease(time.Second, time.Second)},
		{"unknown failure policy", OnFailure(FailurePolicy(7))},
		{"negative dedup window", DedupWindow(-time.Hour)},
		{"dedup window too long", DedupWindow(DedupWindowMax + 1)},
		{"nil middleware", Use(nil)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := resolve(tt.opt).Validate("Queue(q)", true, false)
			require.Len(t, errs, 1, "%v", errs)
			require.ErrorIs(t, errs[0], ErrInvalidOptions)
		})
	}
	errs := resolve(OnFailure(Park), MaxAttempts(MaxAttemptsNever)).Validate("Queue(q)", true, false)
	require.Len(t, errs, 1, "park that never gives up")
}

func TestQueueOptionsBoundaries(t *testing.T) {
	t.Parallel()
	o := resolve(BatchSize(10000), MaxAttempts(MaxAttemptsNever), Retry(time.Millisecond, time.Millisecond),
		Lease(100*time.Millisecond, 99*time.Millisecond))
	require.Empty(t, o.Validate("Queue(q)", true, false))
	require.Empty(t, resolve(BatchSize(1)).Validate("Queue(q)", true, false))
	require.Empty(t, resolve(OnFailure(Park), MaxAttempts(1)).Validate("Queue(q)", true, false))
	require.Equal(t, "park", Park.String())
	require.Equal(t, "dead-letter", DeadLetter.String())
}

// TestQueueOptionsThatDoNotApply: an option on a queue whose handler it
// does not apply to is an error naming it; the same option among the
// defaults is left out.
func TestQueueOptionsThatDoNotApply(t *testing.T) {
	t.Parallel()
	fields := func(errs []error) []string {
		var out []string
		for _, err := range errs {
			out = append(out, err.(interface{ Error() string }).Error())
		}
		return out
	}
	require.Len(t, resolve(Lease(time.Second, 100*time.Millisecond)).Validate("Queue(q)", true, true), 1, "lease on transactional")
	require.Len(t, resolve(HandlerTimeout(time.Second)).Validate("Queue(q)", true, false), 1, "handler timeout on leased")
	errs := resolve(BatchSize(3), DedupWindow(time.Hour)).Validate("Queue(q)", false, false)
	require.Len(t, errs, 1, "%v", fields(errs))
	require.Contains(t, errs[0].Error(), "Queue(q).BatchSize")

	defaults := []handling.Option{Lease(time.Second, 100*time.Millisecond).(handling.Option), HandlerTimeout(time.Second).(handling.Option)}
	o := handling.Resolve(defaults, nil)
	require.Empty(t, o.Validate("Queue(q)", true, true))
	require.Empty(t, o.Validate("Queue(q)", true, false))
	require.Empty(t, o.Validate("Queue(q)", false, false))
}
