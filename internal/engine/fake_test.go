package engine

import (
	"context"
	"errors"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// errUnexpected is what baseFake answers for a call a test did not plan.
var errUnexpected = errors.New("fake store: unexpected call")

// baseFake is a Store that answers every call with errUnexpected (and runs
// transactions as plain calls); the fakes of each test embed it and define
// the calls they expect.
type baseFake struct{}

func (baseFake) RunInTx(ctx context.Context, fn func(context.Context, bun.Tx) error) error {
	return fn(ctx, bun.Tx{})
}
func (baseFake) IsRetryable(error) bool { return false }
func (baseFake) IsTransient(error) bool { return false }
func (baseFake) ProcessorReadyList(context.Context, *dialect.ProcessorReadyListParams) ([]int64, error) {
	return nil, errUnexpected
}
func (baseFake) ProcessorLease(context.Context, *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	return dialect.ProcessorLeaseResult{}, errUnexpected
}
func (baseFake) ProcessorAck(context.Context, *dialect.ProcessorUpdateParams) error {
	return errUnexpected
}
func (baseFake) ProcessorLock(context.Context, *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	return dialect.ProcessorLockResult{}, errUnexpected
}
func (baseFake) OutgoingList(context.Context, *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	return nil, errUnexpected
}
func (baseFake) ProcessorUpdate(context.Context, *dialect.ProcessorUpdateParams) error {
	return errUnexpected
}

var _ PoolStore = baseFake{}
