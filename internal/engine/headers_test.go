package engine

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
)

// FuzzEncodeHeaders: valid UTF-8 headers round-trip exactly through their
// stored JSON form; anything else is refused with ErrInvalidHeaders.
func FuzzEncodeHeaders(f *testing.F) {
	f.Add("k", "v")
	f.Add("\xc3(", "v")
	f.Add("k", "\xff\xfe\xfd")
	f.Add("nul\x00", "\xed\xa0\x80")
	f.Add("", "🙂")
	f.Fuzz(func(t *testing.T, key, value string) {
		h := map[string]string{key: value, "fixed": "x"}
		b, err := encodeHeaders(h)
		if !utf8.ValidString(key) || !utf8.ValidString(value) {
			require.ErrorIs(t, err, outbox.ErrInvalidHeaders, "%q: %q", key, value)
			require.Nil(t, b)
			return
		}
		require.NoError(t, err)
		var back map[string]string
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, h, back, "headers altered on the way")
	})
}

func TestEncodeHeaders(t *testing.T) {
	t.Parallel()
	b, err := encodeHeaders(nil)
	require.NoError(t, err)
	require.Nil(t, b, "nil headers are stored as NULL")
	for name, h := range map[string]map[string]string{
		"invalid key":    {"\xc3(": "v"},
		"invalid value":  {"k": "\xff\xfe\xfd"},
		"lone surrogate": {"k": "\xed\xa0\x80"},
	} {
		_, err := encodeHeaders(h)
		require.ErrorIs(t, err, outbox.ErrInvalidHeaders, name)
		var herr *outbox.HeaderError
		require.ErrorAs(t, err, &herr, name)
	}
}
