// Package lifecycle holds the small helpers every background task shares:
// a stop signal turned into a context, panic recovery, and capped backoff.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"time"
)

// UntilStopping returns a context that ends when ctx ends or stopping closes:
// tasks wait on it for new work, and keep ctx for work already started.
func UntilStopping(ctx context.Context, stopping <-chan struct{}) (context.Context, context.CancelFunc) {
	waitCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-waitCtx.Done():
		}
	}()
	return waitCtx, cancel
}

// PanicError is a recovered panic, with the stack where it happened.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("seqbox: panic: %v", e.Value) }

// Safely runs fn and turns a panic into a *PanicError, so one bad batch or
// handler never takes the process or a worker down.
func Safely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Backoff is base * 2^(n-1), capped at max, for n >= 1 (overflow-safe).
func Backoff(n int, base, max time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	d := base
	for i := 1; i < n; i++ {
		if d > max/2 { // else d*2 <= max: no overflow
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// FullJitter picks uniformly in [0, Backoff(n)]: retries of many partitions
// that failed together spread out instead of arriving in waves.
func FullJitter(n int, base, max time.Duration) time.Duration {
	d := Backoff(n, base, max)
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// Sleep waits d or until ctx ends; it reports whether the full time passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Retry runs fn until it succeeds, fails for good (transient says no), or
// ctx ends: a process starting while the database restarts or a connection
// is killed should wait for it, not give up. Backoff 50 ms doubling to 5 s.
func Retry(ctx context.Context, log *slog.Logger, what string, transient func(error) bool, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		delay := Backoff(attempt, 50*time.Millisecond, 5*time.Second)
		log.Warn("transient database error; retrying", slog.String("step", what), slog.Int("attempt", attempt),
			slog.Duration("retry_in", delay), slog.Any("error", err))
		if !Sleep(ctx, delay) {
			return err
		}
	}
}

// Transient marks err as one a later attempt may not meet (the database
// unreachable), where no dialect exists yet to classify it: the dialect
// constructors that query the server mark their errors so.
func Transient(err error) error { return &transientError{err} }

// IsTransient reports an error marked by Transient.
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// LogPanic logs a recovered panic with its stack.
func LogPanic(log *slog.Logger, msg string, err error, attrs ...any) {
	if pe, ok := err.(*PanicError); ok {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	log.Error(msg, append(attrs, slog.Any("error", err))...)
}
