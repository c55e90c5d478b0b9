package seqboxcli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
)

// history is a small committed set and its correct delivery: two
// partitions, two producers, one key each.
type history struct {
	committed  map[outbox.MessageID]sent
	rolledBack map[outbox.MessageID]struct{}
	good       []delivery
}

func newHistory() history {
	h := history{committed: map[outbox.MessageID]sent{}, rolledBack: map[outbox.MessageID]struct{}{}}
	id := func(n byte) outbox.MessageID { return outbox.MessageID{15: n} }
	seqs := map[int]int64{}
	for n := byte(1); n <= 6; n++ {
		part := int(n % 2)
		m := sent{queue: "q", key: []string{"a", "b"}[part], producer: part, counter: int64(n)}
		h.committed[id(n)] = m
		seqs[part]++
		h.good = append(h.good, delivery{id: id(n), queue: "q", partition: part, seq: seqs[part], msg: m})
	}
	h.rolledBack[id(99)] = struct{}{}
	return h
}

func TestVerifyOK(t *testing.T) {
	t.Parallel()
	h := newHistory()
	r := verify(h.committed, h.rolledBack, h.good)
	require.True(t, r.ok(), r.problems)
	require.Equal(t, "verify: committed=6 delivered=6 duplicates=0 rolled-back-delivered=0 per-partition-order=ok gaps=0 per-key-order=ok -> OK", r.line())
}

func TestVerifyDetects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(h history) []delivery
		check func(t *testing.T, r *report)
	}{
		{"missing message", func(h history) []delivery { return h.good[:5] },
			func(t *testing.T, r *report) { require.Equal(t, 1, r.missing) }},
		{"duplicate", func(h history) []delivery { return append(h.good, h.good[2]) },
			func(t *testing.T, r *report) { require.Equal(t, 1, r.duplicates) }},
		{"rolled back delivered", func(h history) []delivery {
			return append(h.good, delivery{id: outbox.MessageID{15: 99}, queue: "q", partition: 1, seq: 4, msg: sent{queue: "q", key: "b", producer: 1, counter: 100}})
		}, func(t *testing.T, r *report) { require.Equal(t, 1, r.rolledBackDelivered) }},
		{"gap", func(h history) []delivery {
			return []delivery{h.good[0], h.good[1], h.good[3], h.good[4], h.good[5]} // partition 1 skips seq 2
		}, func(t *testing.T, r *report) {
			require.Equal(t, 1, r.gaps)
			require.Equal(t, 1, r.orderViolations)
		}},
		{"out of order", func(h history) []delivery {
			d := append([]delivery(nil), h.good...)
			d[0], d[2] = d[2], d[0] // partition 1: seq 2 before seq 1
			return d
		}, func(t *testing.T, r *report) {
			require.NotZero(t, r.orderViolations)
			require.NotZero(t, r.keyOrderViolations)
		}},
		{"key on two partitions", func(h history) []delivery {
			d := append([]delivery(nil), h.good...)
			d[4].partition, d[4].seq = 0, 4 // key b, on partition 1 so far
			return d
		}, func(t *testing.T, r *report) { require.Equal(t, 1, r.keySplits) }},
		{"payload changed", func(h history) []delivery {
			d := append([]delivery(nil), h.good...)
			d[0].msg.counter = 42
			return d
		}, func(t *testing.T, r *report) { require.Equal(t, 1, r.mismatched) }},
		{"malformed", func(h history) []delivery {
			d := append([]delivery(nil), h.good...)
			d[0].malformed = true
			return d
		}, func(t *testing.T, r *report) { require.Equal(t, 1, r.malformed) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory()
			r := verify(h.committed, h.rolledBack, tt.edit(h))
			require.False(t, r.ok())
			require.Contains(t, r.line(), "-> FAIL")
			require.NotEmpty(t, r.problems)
			tt.check(t, r)
		})
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	m := sent{queue: "q", key: "key7", producer: 3, counter: 12345}
	got, ok := parsePayload("q", m.payload())
	require.True(t, ok)
	require.Equal(t, m, got)
	_, ok = parsePayload("q", []byte("junk"))
	require.False(t, ok)
}
