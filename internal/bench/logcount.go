package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
)

// logCounts counts the warning and error records seqbox logs: a statement
// that fails (a deadlock, a timeout, a lost lease) is logged and retried,
// so it shows in no figure but costs in all of them.
type logCounts struct {
	warnings, errors atomic.Int64

	mu sync.Mutex
	// byMessage counts records per message (level and text, not the
	// varying attributes), for the first logMessagesMax distinct ones.
	byMessage map[string]int64
	// lastError is the last error record's error attribute, an example.
	lastError string
}

const (
	logMessagesMax = 20
	logErrorMax    = 300 // bytes of the example error kept
)

// logSnapshot is the counts at one moment; differences give a run's own.
type logSnapshot struct {
	warnings, errors int64
	byMessage        map[string]int64
}

func (c *logCounts) snapshot() logSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return logSnapshot{warnings: c.warnings.Load(), errors: c.errors.Load(), byMessage: maps.Clone(c.byMessage)}
}

// since puts into extra what was logged after before: counts, counts per
// message and the last error seen.
func (c *logCounts) since(before logSnapshot, extra map[string]any) {
	now := c.snapshot()
	extra["log_errors"] = now.errors - before.errors
	extra["log_warnings"] = now.warnings - before.warnings
	msgs := map[string]int64{}
	for msg, n := range now.byMessage {
		if d := n - before.byMessage[msg]; d > 0 {
			msgs[msg] = d
		}
	}
	if len(msgs) > 0 {
		extra["log_messages"] = msgs
		c.mu.Lock()
		extra["log_last_error"] = c.lastError
		c.mu.Unlock()
	}
}

// explain adds what seqbox logged to a run's error: a run that timed out
// waiting for deliveries usually failed on a statement the log names.
func (c *logCounts) explain(err error) error {
	n := c.errors.Load()
	if n == 0 {
		return err
	}
	c.mu.Lock()
	last := c.lastError
	c.mu.Unlock()
	return fmt.Errorf("%w (seqbox logged %d errors; the last: %s)", err, n, last)
}

func (c *logCounts) add(r slog.Record, errText string) {
	if r.Level >= slog.LevelError {
		c.errors.Add(1)
	} else {
		c.warnings.Add(1)
	}
	key := r.Level.String() + " " + r.Message
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byMessage == nil {
		c.byMessage = map[string]int64{}
	}
	if _, ok := c.byMessage[key]; ok || len(c.byMessage) < logMessagesMax {
		c.byMessage[key]++
	}
	if errText != "" && r.Level >= slog.LevelError {
		c.lastError = errText[:min(len(errText), logErrorMax)]
	}
}

// countingHandler counts warnings and errors, whatever level the wrapped
// handler prints, and passes every record it wants on to it.
type countingHandler struct {
	inner  slog.Handler
	counts *logCounts
	// errAttr is an "error" attribute added by With, for records that
	// carry it that way.
	errAttr string
}

func newCountingHandler(inner slog.Handler, counts *logCounts) *countingHandler {
	return &countingHandler{inner: inner, counts: counts}
}

func (h *countingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn || h.inner.Enabled(ctx, level)
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		errText := h.errAttr
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" || a.Key == "err" {
				errText = a.Value.String()
				return false
			}
			return true
		})
		h.counts.add(r, errText)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := *h
	next.inner = h.inner.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == "error" || a.Key == "err" {
			next.errAttr = a.Value.String()
		}
	}
	return &next
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	next := *h
	next.inner = h.inner.WithGroup(name)
	return &next
}
