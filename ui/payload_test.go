package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
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

func TestLagClass(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age  time.Duration
		want string
	}{{0, ""}, {9 * time.Second, ""}, {10 * time.Second, "lag-s"}, {59 * time.Second, "lag-s"}, {time.Minute, "lag-m"}, {48 * time.Hour, "lag-m"}} {
		require.Equal(t, c.want, lagClass(outbox.PartitionStats{OldestUnprocessed: now.Add(-c.age)}, now), "%s", c.age)
	}
	require.Empty(t, lagClass(outbox.PartitionStats{}, now), "no backlog, no lag")
}

func TestFormatRate(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{0: "0.0", 0.04: "0.0", 2.345: "2.3", 9.94: "9.9", 9.96: "10", 10.2: "10", 55.5: "56", 1234: "1234"} {
		require.Equal(t, want, formatRate(f), "%v", f)
	}
}
