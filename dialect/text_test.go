package dialect_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

func TestErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "boom", "boom"},
		{"unicode kept", "échec 日本 🙂", "échec 日本 🙂"},
		{"NUL escaped", "a\x00b", `a\x00b`},
		{"invalid byte escaped", "a\xffb", `a\xffb`},
		{"truncated rune escaped", "a\xc3", `a\xc3`},
		{"lone surrogate escaped", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"newlines kept", "line1\nline2\t", "line1\nline2\t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, dialect.ErrorText(tt.in))
		})
	}
}

func TestErrorTextTruncation(t *testing.T) {
	t.Parallel()
	const limit = dialect.MaxErrorTextLen
	pad := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"short", "boom", "boom"},
		{"exactly the limit", pad(limit), pad(limit)},
		{"one over, ASCII", pad(limit + 1), pad(limit)},
		{"far over, ASCII", pad(3 * limit), pad(limit)},
		// A rune that straddles the limit is dropped whole, never split.
		{"2-byte rune across the limit", pad(limit-1) + "é" + "tail", pad(limit - 1)},
		{"3-byte rune across the limit, 1 byte in", pad(limit-1) + "€" + "tail", pad(limit - 1)},
		{"3-byte rune across the limit, 2 bytes in", pad(limit-2) + "€" + "tail", pad(limit - 2)},
		{"4-byte rune across the limit", pad(limit-3) + "😀" + "tail", pad(limit - 3)},
		{"rune ending at the limit is kept", pad(limit-2) + "é" + "tail", pad(limit-2) + "é"},
		{"all multi-byte", strings.Repeat("€", limit), strings.Repeat("€", limit/3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := dialect.ErrorText(tt.in)
			require.Equal(t, tt.want, got)
			require.LessOrEqual(t, len(got), limit)
			require.True(t, utf8.ValidString(got), "cut inside a rune")
		})
	}
}

func TestErrorTextBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", dialect.MaxErrorTextLen) // 2 bytes each
	got := dialect.ErrorText(long)
	require.LessOrEqual(t, len(got), dialect.MaxErrorTextLen)
	require.True(t, utf8.ValidString(got), "cut on a rune boundary")
	require.Equal(t, got, dialect.ErrorText(got), "idempotent")

	nuls := strings.Repeat("\x00", dialect.MaxErrorTextLen)
	got = dialect.ErrorText(nuls)
	require.LessOrEqual(t, len(got), dialect.MaxErrorTextLen)
	require.NotContains(t, got, "\x00")
}

type nilPointerError struct{ msg string }

func (e *nilPointerError) Error() string { return e.msg }

func TestErrorStringSurvivesPanickingError(t *testing.T) {
	t.Parallel()
	var typedNil *nilPointerError
	var err error = typedNil
	require.NotPanics(t, func() { _ = dialect.ErrorString(err) })
	require.NotEmpty(t, dialect.ErrorString(err)) // fmt prints "<nil>" for a nil receiver
	require.Empty(t, dialect.ErrorString(nil))
}

func FuzzErrorText(f *testing.F) {
	for _, s := range []string{"", "boom", "a\x00b", "\xff\xfe", "\xed\xa0\x80", strings.Repeat("日", 2000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := dialect.ErrorText(s)
		require.True(t, utf8.ValidString(got), "%q", got)
		require.NotContains(t, got, "\x00")
		require.LessOrEqual(t, len(got), dialect.MaxErrorTextLen)
		require.Equal(t, got, dialect.ErrorText(got), "idempotent")
		if utf8.ValidString(s) && !strings.Contains(s, "\x00") && len(s) <= dialect.MaxErrorTextLen {
			require.Equal(t, s, got, "clean text is stored as is")
		}
	})
}
