package processor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/handling"
)

// TestDefaultsMatchTheEngine: the defaults documented here are the ones the
// engine fills in.
func TestDefaultsMatchTheEngine(t *testing.T) {
	t.Parallel()
	require.Equal(t, handling.BatchSizeDefault, BatchSizeDefault)
	require.Equal(t, handling.BatchSizeMax, BatchSizeMax)
	require.Equal(t, handling.MaxAttemptsDefault, MaxAttemptsDefault)
	require.Equal(t, handling.RetryBaseDefault, RetryBaseDefault)
	require.Equal(t, handling.RetryMaxDefault, RetryMaxDefault)
	require.Equal(t, handling.LeaseDefault, LeaseDefault)
	require.Equal(t, handling.LeaseHeadroomDefault, LeaseHeadroomDefault)
	require.Equal(t, handling.HandlerTimeoutDefault, HandlerTimeoutDefault)
	require.Equal(t, handling.DedupWindowDefault, DedupWindowDefault)
	require.Equal(t, handling.DedupWindowMax, DedupWindowMax)
	require.Equal(t, handling.DeadLetter, int(DeadLetter))
	require.Equal(t, handling.Park, int(Park))
}
