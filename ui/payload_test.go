package ui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestViewPayload(t *testing.T) {
	t.Parallel()
	require.Equal(t, payloadView{Kind: "empty"}, viewPayload(nil))
	v := viewPayload([]byte(`{"a":[1,2],"b":"<x>"}`))
	require.Equal(t, "json", v.Kind)
	require.Equal(t, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"<x>\"\n}", v.Text)
	v = viewPayload([]byte("plain <b>text</b>\nline 2"))
	require.Equal(t, payloadView{Kind: "text", Text: "plain <b>text</b>\nline 2", Size: 24}, v)
	v = viewPayload([]byte{0xff, 0x00, 'A'})
	require.Equal(t, "binary", v.Kind)
	require.Contains(t, v.Text, "ff 00 41")
	big := []byte(`"` + strings.Repeat("a", maxShownPayload) + `"`)
	v = viewPayload(big)
	require.Equal(t, "text", v.Kind, "a payload cut to the shown bound is not pretty-printed")
	require.Len(t, v.Text, maxShownPayload)
	require.Equal(t, len(big), v.Size)

	require.Equal(t, "first", preview([]byte("first\nsecond"), 10))
	require.Equal(t, "abc…", preview([]byte("abcdef"), 3))
	require.Equal(t, "ff00", preview([]byte{0xff, 0x00, 0x01}, 4))
	require.Equal(t, "éé…", preview([]byte("ééé"), 2), "cut on runes")
}
