package conformance

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
)

// Outbox is a running outbox under test: the public handle, and the engine
// behind it for the hooks the public API does not offer (a vacuum pass
// now, a reconcile scan now, partition row ids).
type Outbox struct {
	*seqbox.Outbox
	E *engine.Outbox
}

// StartOutbox starts b and returns it with its engine.
func StartOutbox(ctx context.Context, b *seqbox.Builder) (*Outbox, error) {
	var c engine.Capture
	ob, err := b.Start(engine.WithCapture(ctx, &c))
	if err != nil {
		return nil, err
	}
	return &Outbox{Outbox: ob, E: c.Outbox}, nil
}

// Sweep runs one vacuum pass now.
func (o *Outbox) Sweep(ctx context.Context) (int, error) { return o.E.Sweep(ctx) }

// Reconcile scans the incoming table now.
func (o *Outbox) Reconcile(ctx context.Context) error { return o.E.Reconcile(ctx) }

// PartitionIDs are a queue's partition row ids, by partition number.
func (o *Outbox) PartitionIDs(queue string) []int64 { return o.E.PartitionIDs(queue) }

// DeadLetters is o.Admin().DeadLetters().
func (o *Outbox) DeadLetters() *seqbox.DeadLetters { return o.Admin().DeadLetters() }

// Partitions is o.Admin().Partitions().
func (o *Outbox) Partitions() *seqbox.Partitions { return o.Admin().Partitions() }

// Purge is o.Admin().Purge.
func (o *Outbox) Purge(ctx context.Context, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	return o.Admin().Purge(ctx, queue, f)
}

// PreviewPurge is o.Admin().PreviewPurge.
func (o *Outbox) PreviewPurge(ctx context.Context, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	return o.Admin().PreviewPurge(ctx, queue, f)
}

// EnqueueResult enqueues one message and says whether it was a duplicate.
func (o *Outbox) EnqueueResult(ctx context.Context, conn bun.IConn, queue string, m outbox.Message) (outbox.Enqueued, error) {
	res, err := o.EnqueueBatchResult(ctx, conn, queue, []outbox.Message{m})
	if err != nil {
		return outbox.Enqueued{}, err
	}
	return res[0], nil
}

// partitionsAdmin is the partition actions of e's tables, without an outbox.
func partitionsAdmin(e *Env) (*seqbox.Partitions, error) {
	a, err := seqbox.NewAdmin(context.Background(), e.DB, e.Prefix)
	if err != nil {
		return nil, err
	}
	return a.Partitions(), nil
}
