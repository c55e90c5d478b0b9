package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNextBound: the move's lower bound never passes a transaction that
// may still add rows (the snapshot's xmin) nor, after a full batch, the
// last transaction read; it never goes back.
func TestNextBound(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(50), nextBound(10, 50, 40, false), "all read: up to xmin")
	require.Equal(t, int64(40), nextBound(10, 50, 40, true), "full batch: rows of xid 40 may remain")
	require.Equal(t, int64(50), nextBound(10, 50, 70, true), "full batch past xmin: xmin still bounds")
	require.Equal(t, int64(60), nextBound(60, 50, 40, false), "never back")
}
