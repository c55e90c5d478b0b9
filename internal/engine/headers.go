package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"unicode/utf8"

	"github.com/seqbox/seqbox/outbox"
)

// encodeHeaders checks and encodes a message's headers as the JSON object
// stored with it. Keys and values must be valid UTF-8: JSON text cannot
// carry other bytes, and encoding would silently replace them, so such
// headers are refused with outbox.ErrInvalidHeaders instead of delivered altered.
// Nil headers encode as nil (stored as NULL).
func encodeHeaders(h map[string]string) ([]byte, error) {
	if h == nil {
		return nil, nil
	}
	for k, v := range h {
		if !utf8.ValidString(k) {
			return nil, &outbox.HeaderError{Key: k, Reason: "key is not valid UTF-8"}
		}
		if !utf8.ValidString(v) {
			return nil, &outbox.HeaderError{Key: k, Reason: "value is not valid UTF-8"}
		}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", outbox.ErrInvalidHeaders, err)
	}
	return b, nil
}

// extraHeaders are Config.EnqueueHeaders' headers for one call, or nil. A
// panic in the hook is the enqueue's error, not the caller's crash.
func (o *Outbox) extraHeaders(ctx context.Context, queue string) (extra map[string]string) {
	if o.cfg.EnqueueHeaders == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			o.log.Error("EnqueueHeaders panicked; enqueued without its headers", slog.Any("panic", r))
			extra = nil
		}
	}()
	return o.cfg.EnqueueHeaders(ctx, queue)
}

// withHeaders is h plus the extra headers h does not set, as a new map when
// there is anything to add.
func withHeaders(h, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return h
	}
	out := make(map[string]string, len(h)+len(extra))
	maps.Copy(out, extra)
	maps.Copy(out, h)
	return out
}
