package sequencer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/prioritizer"
)

// tunedStore is a Store whose only real answer is its tuning.
type tunedStore struct{ workers int }

func (s tunedStore) Tuning() dialect.Tuning { return dialect.Tuning{SequencerWorkers: s.workers} }
func (tunedStore) IsRetryable(error) bool   { return false }
func (tunedStore) IncomingPartitionList(context.Context, *dialect.IncomingPartitionListParams) ([]int64, error) {
	return nil, nil
}
func (tunedStore) SequenceMove(context.Context, *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	return dialect.SequenceMoveResult{}, nil
}
func (tunedStore) SequenceMoveMany(context.Context, *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	return nil, nil
}

// TestWorkersFromTuning: an unset worker count takes the database's
// measured default; an explicit one is never overridden.
func TestWorkersFromTuning(t *testing.T) {
	t.Parallel()
	prio := prioritizer.New(prioritizer.Config{})
	require.Equal(t, 2, New(tunedStore{workers: 2}, prio, nil, Config{}).cfg.Workers)
	require.Equal(t, 1, New(tunedStore{workers: 1}, prio, nil, Config{}).cfg.Workers)
	require.Equal(t, 3, New(tunedStore{workers: 1}, prio, nil, Config{Workers: 3}).cfg.Workers)
	require.Equal(t, WorkersDefault, New(tunedStore{}, prio, nil, Config{}).cfg.Workers, "no tuning known")
}
