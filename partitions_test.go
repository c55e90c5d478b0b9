package seqbox

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPartitionStateCheck: what each action refuses, and in which order:
// a partition whose head has not failed is refused for that reason even
// while a delivery is in flight, so the loser of two operators skipping
// one partition gets ErrNotParked whether or not the winner's skip is
// being delivered already.
func TestPartitionStateCheck(t *testing.T) {
	t.Parallel()
	ok := PartitionState{Queue: "q", Partition: 3, State: StateOK}
	retrying := PartitionState{Queue: "q", Partition: 3, State: StateRetrying}
	parked := PartitionState{Queue: "q", Partition: 3, State: StateParked}
	busy := func(p PartitionState) PartitionState { p.InFlight = true; return p }
	for _, tt := range []struct {
		name   string
		state  PartitionState
		action string
		want   []error // nil: it acts
	}{
		{"resume parked", parked, ActionResume, nil},
		{"resume retrying", retrying, ActionResume, []error{ErrNotParked}},
		{"resume ok", ok, ActionResume, []error{ErrNotParked}},
		{"retry retrying", retrying, ActionRetry, nil},
		{"retry retrying in flight", busy(retrying), ActionRetry, []error{ErrPartitionBusy}},
		{"retry parked", parked, ActionRetry, []error{ErrNotRetrying}},
		{"retry ok in flight", busy(ok), ActionRetry, []error{ErrNotRetrying}},
		{"skip parked", parked, ActionSkip, nil},
		{"skip retrying", retrying, ActionSkip, nil},
		{"skip retrying in flight", busy(retrying), ActionSkip, []error{ErrPartitionBusy}},
		{"skip ok", ok, ActionSkip, []error{ErrNotParked, ErrNotRetrying}},
		{"skip ok in flight", busy(ok), ActionSkip, []error{ErrNotParked, ErrNotRetrying}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.state.Check(tt.action)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			for _, want := range tt.want {
				require.ErrorIs(t, err, want)
			}
			var pe *PartitionError
			require.True(t, errors.As(err, &pe))
			require.Equal(t, PartitionError{Queue: "q", Partition: 3, Action: tt.action, Err: pe.Err}, *pe)
		})
	}
	require.Error(t, ok.Check("frobnicate"))
}
