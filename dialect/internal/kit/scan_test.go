package kit

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// namedValueRE is the definition scanNamed implements by hand.
var namedValueRE = regexp.MustCompile(`\?([a-z][a-z0-9_]*)`)

// FuzzScanNamed: the scanner finds what the regexp finds, and the text
// between is given back unchanged.
func FuzzScanNamed(f *testing.F) {
	for _, s := range []string{"", "?", "??", "?a", "a?b", "(?id, ?key, ?payload_type)", "?A ?_x ?x9_ ?9", "?a?b", "x = ?", "é?ñ?n", "?rows__12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		want := namedValueRE.ReplaceAllStringFunc(text, func(m string) string { return "<" + m[1:] + ">" })
		got := replaceNamed(text, func(name string) string { return "<" + name + ">" })
		require.Equal(t, want, got)
		var wantNames []string
		for _, m := range namedValueRE.FindAllStringSubmatch(text, -1) {
			wantNames = append(wantNames, m[1])
		}
		var gotNames []string
		scanNamed(text, func(string) {}, func(name string) { gotNames = append(gotNames, name) })
		require.Equal(t, wantNames, gotNames)
	})
}
