package deadletter_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
)

func TestTruncateError(t *testing.T) {
	t.Parallel()
	const limit = deadletter.MaxErrorLen
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
			got := deadletter.TruncateError(tt.in)
			require.Equal(t, tt.want, got)
			require.LessOrEqual(t, len(got), limit)
			require.True(t, utf8.ValidString(got), "cut inside a rune")
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	m := dialect.OutgoingMessage{
		Seq: 42, ID: dialect.MessageID{0x01, 0x8f, 0xff}, PayloadType: "order.created",
		Payload: []byte(`{"id":1}`), Headers: []byte(`{"trace":"x"}`),
		CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC),
	}
	got := deadletter.New(9, m, errors.New("cannot parse"), 3)
	require.Equal(t, dialect.DeadLetter{
		PartitionID: 9, Seq: 42, MessageID: m.ID, PayloadType: "order.created",
		Payload: m.Payload, Headers: m.Headers, CreatedAt: m.CreatedAt,
		LastError: "cannot parse", Attempts: 3,
	}, got)

	require.Equal(t, "rejected", deadletter.New(9, m, nil, 1).LastError, "a nil cause still says why")

	long := deadletter.New(9, m, errors.New(strings.Repeat("x", deadletter.MaxErrorLen+10)), 1)
	require.Len(t, long.LastError, deadletter.MaxErrorLen, "the stored error is bounded")
}
