package configerr_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/configerr"
)

func TestIn(t *testing.T) {
	t.Parallel()
	own := errors.New("own sentinel")
	err := configerr.In("Queues[q].Options", &configerr.Error{Field: "BatchSize", Reason: "must be 1..10000", Also: own})
	require.ErrorIs(t, err, configerr.ErrInvalid)
	require.ErrorIs(t, err, own)
	var ce *configerr.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Queues[q].Options.BatchSize", ce.Field)
	require.Equal(t, "seqbox: invalid configuration: Queues[q].Options.BatchSize: must be 1..10000", err.Error())
	require.NoError(t, configerr.In("X", nil))
	require.ErrorIs(t, configerr.In("X", errors.New("plain")), configerr.ErrInvalid)
}
