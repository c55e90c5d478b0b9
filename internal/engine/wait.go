// WaitProcessed: polling until given messages have been delivered.

package engine

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/outbox"
)

// WaitProcessed returns when every given message has been acked (or
// dead-lettered), or with a *outbox.PendingError when ctx ends first. Ids that
// were never committed count as done.
func (o *Outbox) WaitProcessed(ctx context.Context, ids ...outbox.MessageID) error {
	delay := 2 * time.Millisecond
	for {
		pending, err := o.pending(ctx, ids)
		if err != nil {
			if ctx.Err() != nil {
				return &outbox.PendingError{IDs: ids, Err: ctx.Err()}
			}
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		if !lifecycle.Sleep(ctx, delay) {
			return &outbox.PendingError{IDs: pending, Err: ctx.Err()}
		}
		ids = pending
		delay = min(delay*2, 250*time.Millisecond)
	}
}

func (o *Outbox) pending(ctx context.Context, ids []outbox.MessageID) ([]outbox.MessageID, error) {
	return o.d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: ids})
}
