package uuidv7_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/uuidv7"
)

func TestFillLayout(t *testing.T) {
	t.Parallel()
	// 0x0123456789ab ms is a date in 2009; every byte of the prefix differs,
	// so a shifted or reordered timestamp cannot pass.
	now := time.UnixMilli(0x0123456789ab).Add(999 * time.Microsecond) // sub-ms part is dropped
	ids := make([][16]byte, 64)
	require.NoError(t, uuidv7.Fill(ids, now))
	for _, id := range ids {
		require.Equal(t, []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}, id[0:6], "48-bit big-endian Unix ms")
		require.Equal(t, byte(7), id[6]>>4, "version nibble")
		require.Equal(t, byte(0b10), id[8]>>6, "RFC 9562 variant bits")
	}
}

func TestFillTimestampIsNow(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ids := make([][16]byte, 1)
	require.NoError(t, uuidv7.Fill(ids, now))
	var head [8]byte
	copy(head[2:], ids[0][0:6])
	require.Equal(t, uint64(now.UnixMilli()), binary.BigEndian.Uint64(head[:]))
}

func TestFillUnique(t *testing.T) {
	t.Parallel()
	// One timestamp for all: uniqueness must come from the random bits.
	ids := make([][16]byte, 10000)
	require.NoError(t, uuidv7.Fill(ids, time.Now()))
	seen := make(map[[16]byte]struct{}, len(ids))
	for _, id := range ids {
		_, dup := seen[id]
		require.False(t, dup, "duplicate id %x", id)
		seen[id] = struct{}{}
	}
	require.Len(t, seen, len(ids))
}

func TestFillRandomBitsVary(t *testing.T) {
	t.Parallel()
	// Each id gets its own slice of the random read: consecutive ids differ
	// in the random tail, not only somewhere.
	ids := make([][16]byte, 2)
	require.NoError(t, uuidv7.Fill(ids, time.Now()))
	require.NotEqual(t, ids[0][9:], ids[1][9:])
}

func TestFillEmpty(t *testing.T) {
	t.Parallel()
	require.NoError(t, uuidv7.Fill(nil, time.Now()))
}
