package outbox_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
)

func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		ok    bool
	}{
		{"simple", "orders", true},
		{"one char", "a", true},
		{"one digit", "7", true},
		{"mixed", "Billing.v2_events-EU", true},
		{"punctuation inside", "a._-b", true},
		{"repeated dots inside", "a..b", true},
		{"max length", strings.Repeat("q", outbox.MaxQueueNameLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("q", outbox.MaxQueueNameLen+1), false},
		{"leading dot", ".orders", false},
		{"trailing dot", "orders.", false},
		{"leading dash", "-orders", false},
		{"trailing dash", "orders-", false},
		{"leading underscore", "_orders", false},
		{"trailing underscore", "orders_", false},
		{"single dot", ".", false},
		{"space", "my orders", false},
		{"slash", "a/b", false},
		{"unicode", "ordérs", false},
		{"NUL", "ord\x00ers", false},
		{"newline", "orders\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := outbox.ValidateQueueName(tt.input)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, outbox.ErrInvalidQueueName)
			var qerr *outbox.QueueNameError
			require.ErrorAs(t, err, &qerr)
			require.Equal(t, tt.input, qerr.Name)
		})
	}
}

func TestValidatePayloadType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		ok    bool
	}{
		{"mime", "application/json", true},
		{"space is printable", "a b", true},
		{"lowest printable", " ", true},
		{"highest printable", "~", true},
		{"max length", strings.Repeat("t", outbox.MaxPayloadTypeLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("t", outbox.MaxPayloadTypeLen+1), false},
		{"DEL", "type\x7f", false},
		{"unit separator", "type\x1f", false},
		{"tab", "a\tb", false},
		{"NUL", "a\x00b", false},
		{"unicode", "tÿpe", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := outbox.ValidatePayloadType(tt.input)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, outbox.ErrInvalidPayloadType)
		})
	}
}

// fnv1a32 is FNV-1a (32-bit) written out, independent of hash/fnv, so a
// change of PartitionForKey's hash cannot slip through by changing both.
func fnv1a32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// TestPartitionForKeyGolden pins the key → partition mapping: it is part of
// the stored format, so changing it would move existing keys to other
// partitions and break their order.
func TestPartitionForKeyGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key        string
		hash       uint32
		partitions int
		want       int
	}{
		// Published FNV-1a 32 test vectors.
		{"", 0x811c9dc5, 16, 5},
		{"a", 0xe40c292c, 16, 12},
		{"foobar", 0xbf9cf968, 7, 0},
		// Typical keys, including non-ASCII bytes.
		{"customer-42", 0xfe68adbe, 16, 14},
		{"customer-42", 0xfe68adbe, 1024, 446},
		{"customer-42", 0xfe68adbe, 1, 0},
		{"order-1001", 0x916f3d8c, 7, 2},
		{"zürich", 0xaeca5e40, 1024, 576},
		{"tenant/7", 0x4937362b, 16, 11},
	}
	for _, tt := range tests {
		require.Equal(t, tt.hash, fnv1a32(tt.key), "hand-rolled FNV-1a of %q", tt.key)
		require.Equal(t, tt.want, int(tt.hash%uint32(tt.partitions)), "table entry for %q", tt.key)
		require.Equal(t, tt.want, outbox.PartitionForKey(tt.key, tt.partitions), "key %q, %d partitions", tt.key, tt.partitions)
	}
}

// TestQueueNameErrorMessage checks the error names the value and the rule,
// since it is what a user sees.
func TestQueueNameErrorMessage(t *testing.T) {
	t.Parallel()
	err := outbox.ValidateQueueName("bad name")
	require.Error(t, err)
	require.Contains(t, err.Error(), `"bad name"`)
	require.Contains(t, err.Error(), "1..64")
	require.False(t, errors.Is(err, outbox.ErrInvalidPayloadType), "must match only its own sentinel")
}

// TestPartitionForKeyTotal: counts below 1 never panic or go out of range.
func TestPartitionForKeyTotal(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, -1024, math.MinInt} {
		require.NotPanics(t, func() { require.Zero(t, outbox.PartitionForKey("tenant-42", n), "n=%d", n) })
	}
	require.Zero(t, outbox.PartitionForKey("tenant-42", 1))
}

func TestPurgeFilterBounds(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, outbox.PurgeFilter{}.Validate(), outbox.ErrInvalidPurgeFilter, "no header: a purge of everything is not offered")
	many := map[string]string{}
	for i := range outbox.MaxPurgeHeaders + 1 {
		many[fmt.Sprint("h", i)] = "v"
	}
	require.ErrorIs(t, outbox.PurgeFilter{Headers: many}.Validate(), outbox.ErrInvalidPurgeFilter)
	delete(many, "h0")
	require.NoError(t, outbox.PurgeFilter{Headers: many}.Validate())
}
