package engine

import (
	"encoding/json"
	"fmt"
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
