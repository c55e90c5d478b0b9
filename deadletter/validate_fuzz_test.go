package deadletter_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/deadletter"
)

// FuzzFilterValidate: a filter on error text and one header is valid iff
// the text and the header are valid UTF-8 without NUL, the text is within
// MaxErrorLen and the header's name is non-empty; refusals match
// ErrInvalidSelection.
func FuzzFilterValidate(f *testing.F) {
	f.Add("timeout", "tenant", "42")
	f.Add("", "", "x")
	f.Add("\xff", "k", "v")
	f.Add("a\x00b", "k", "v")
	f.Add("<script>", "k\x00", "v")
	f.Add("x", "\xc3(", "v")
	f.Fuzz(func(t *testing.T, text, name, value string) {
		err := deadletter.Filter{ErrorContains: text, Headers: map[string]string{name: value}}.Validate()
		ok := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
		if ok(text) && len(text) <= deadletter.MaxErrorLen && name != "" && ok(name) && ok(value) {
			require.NoError(t, err, "%q %q=%q", text, name, value)
			return
		}
		require.ErrorIs(t, err, deadletter.ErrInvalidSelection, "%q %q=%q", text, name, value)
	})
}
