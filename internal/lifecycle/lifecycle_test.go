package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/lifecycle"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	const maxDuration = time.Duration(math.MaxInt64)
	tests := []struct {
		name      string
		n         int
		base, max time.Duration
		want      time.Duration
	}{
		{"first is base", 1, time.Second, 5 * time.Minute, time.Second},
		{"n below one is the first", 0, time.Second, 5 * time.Minute, time.Second},
		{"negative n", -3, time.Second, 5 * time.Minute, time.Second},
		{"doubles", 2, time.Second, 5 * time.Minute, 2 * time.Second},
		{"doubles again", 3, time.Second, 5 * time.Minute, 4 * time.Second},
		{"below the cap", 9, time.Second, 5 * time.Minute, 256 * time.Second},
		{"capped", 10, time.Second, 5 * time.Minute, 5 * time.Minute},
		{"exactly the cap", 3, time.Second, 4 * time.Second, 4 * time.Second},
		{"odd cap: doubling that fits is kept", 2, 2, 5, 4},
		{"odd cap: doubling past it is capped", 3, 2, 5, 5},
		{"base above cap", 1, time.Minute, time.Second, time.Second},
		{"huge n", math.MaxInt, time.Second, 5 * time.Minute, 5 * time.Minute},
		{"largest power below MaxInt64", 63, 1, maxDuration, 1 << 62},
		{"no overflow at MaxInt64", 64, 1, maxDuration, maxDuration},
		{"huge n, MaxInt64 cap", math.MaxInt, 1, maxDuration, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, lifecycle.Backoff(tt.n, tt.base, tt.max))
		})
	}
}

func TestFullJitter(t *testing.T) {
	t.Parallel()
	const base, maxDelay = 10 * time.Millisecond, time.Second
	for _, n := range []int{1, 2, 5, 100} {
		limit := lifecycle.Backoff(n, base, maxDelay)
		seen := make(map[time.Duration]bool)
		for range 1000 {
			d := lifecycle.FullJitter(n, base, maxDelay)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, limit, "n=%d", n)
			seen[d] = true
		}
		// Uniform over millions of nanoseconds: 1000 draws are all but
		// certain to differ; a constant would mean no jitter at all.
		require.Greater(t, len(seen), 900, "n=%d", n)
	}
	require.Zero(t, lifecycle.FullJitter(3, 0, time.Second), "no delay to spread")
}

func TestSafely(t *testing.T) {
	t.Parallel()
	require.NoError(t, lifecycle.Safely(func() error { return nil }))

	want := errors.New("plain")
	require.Same(t, want, lifecycle.Safely(func() error { return want }), "errors pass through unchanged")

	err := lifecycle.Safely(func() error { panicHere("kaput"); return nil })
	var pe *lifecycle.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "kaput", pe.Value)
	require.Equal(t, "seqbox: panic: kaput", pe.Error())
	require.Contains(t, string(pe.Stack), "panicHere", "the stack shows where the panic happened")
}

// panicHere is a named frame to look for in the recovered stack.
func panicHere(v any) { panic(v) }

func TestLogPanicAddsStack(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	err := lifecycle.Safely(func() error { panicHere("kaput"); return nil })
	lifecycle.LogPanic(log, "task failed", err, slog.String("queue", "q"))
	require.Contains(t, buf.String(), "task failed")
	require.Contains(t, buf.String(), "queue=q")
	require.Contains(t, buf.String(), "stack=")
	require.Contains(t, buf.String(), "panicHere")

	buf.Reset()
	lifecycle.LogPanic(log, "task failed", errors.New("plain"))
	require.Contains(t, buf.String(), "error=plain")
	require.NotContains(t, buf.String(), "stack=", "only panics carry a stack")
}

func TestUntilStopping(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		stopping := make(chan struct{})
		waitCtx, cancel := lifecycle.UntilStopping(context.Background(), stopping)
		defer cancel()
		require.NoError(t, waitCtx.Err(), "not stopped yet")
		close(stopping)
		select {
		case <-waitCtx.Done():
		case <-time.After(5 * time.Second):
			require.FailNow(t, "closing stopping did not cancel the wait context")
		}
		require.ErrorIs(t, waitCtx.Err(), context.Canceled)
	})
	t.Run("parent ends", func(t *testing.T) {
		t.Parallel()
		parent, cancelParent := context.WithCancel(context.Background())
		waitCtx, cancel := lifecycle.UntilStopping(parent, make(chan struct{}))
		defer cancel()
		cancelParent()
		select {
		case <-waitCtx.Done():
		case <-time.After(5 * time.Second):
			require.FailNow(t, "the parent's end did not reach the wait context")
		}
	})
	t.Run("stop leaves the parent running", func(t *testing.T) {
		t.Parallel()
		parent, cancelParent := context.WithCancel(context.Background())
		defer cancelParent()
		stopping := make(chan struct{})
		waitCtx, cancel := lifecycle.UntilStopping(parent, stopping)
		defer cancel()
		close(stopping)
		<-waitCtx.Done()
		require.NoError(t, parent.Err(), "work already started keeps its context")
	})
}

func TestSleep(t *testing.T) {
	t.Parallel()
	require.True(t, lifecycle.Sleep(context.Background(), time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	require.False(t, lifecycle.Sleep(ctx, time.Hour))
	require.Less(t, time.Since(start), time.Minute, "returns when ctx ends, not after d")
}

func TestTransientMark(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection refused")
	marked := fmt.Errorf("start: %w", lifecycle.Transient(cause))
	require.True(t, lifecycle.IsTransient(marked), "found through wrapping")
	require.ErrorIs(t, marked, cause, "the cause is kept")
	require.Equal(t, "start: connection refused", marked.Error(), "the text is the cause's")
	require.False(t, lifecycle.IsTransient(cause))
	require.False(t, lifecycle.IsTransient(nil))
}

func TestRetry(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	calls := 0
	err := lifecycle.Retry(t.Context(), log, "test", lifecycle.IsTransient, func() error {
		if calls++; calls < 3 {
			return lifecycle.Transient(errors.New("down"))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "retried until it succeeded")

	final := errors.New("bad")
	calls = 0
	err = lifecycle.Retry(t.Context(), log, "test", lifecycle.IsTransient, func() error { calls++; return final })
	require.ErrorIs(t, err, final)
	require.Equal(t, 1, calls, "a lasting error is not retried")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	err = lifecycle.Retry(ctx, log, "test", lifecycle.IsTransient, func() error { calls++; return lifecycle.Transient(final) })
	require.ErrorIs(t, err, final)
	require.Equal(t, 1, calls, "no retry once ctx has ended")
}
