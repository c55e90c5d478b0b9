package kit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSortHeads: a head read's rows in any order come out by partition,
// then id, so that NumberRows gives each partition's rows their seqs in id
// order.
func TestSortHeads(t *testing.T) {
	t.Parallel()
	rows := []headRow{
		{PartitionID: 9, ID: 31, BodyID: []byte{3}},
		{PartitionID: 2, ID: 40, BodyID: []byte{4}},
		{PartitionID: 9, ID: 12, BodyID: []byte{1}},
		{PartitionID: 2, ID: 5, BodyID: []byte{2}},
		{PartitionID: 9, ID: 20, BodyID: []byte{5}},
	}
	sortHeads(rows)
	require.Equal(t, []headRow{
		{PartitionID: 2, ID: 5, BodyID: []byte{2}},
		{PartitionID: 2, ID: 40, BodyID: []byte{4}},
		{PartitionID: 9, ID: 12, BodyID: []byte{1}},
		{PartitionID: 9, ID: 20, BodyID: []byte{5}},
		{PartitionID: 9, ID: 31, BodyID: []byte{3}},
	}, rows)
	moved, seqs := NumberRows(rows, map[int64]int64{2: 10, 9: 0})
	require.Equal(t, []int64{11, 12, 1, 2, 3}, seqs)
	require.Equal(t, map[int64]*PartMove{2: {Base: 10, N: 2}, 9: {Base: 0, N: 3}}, moved)
}
