// The engine's test hooks (Reconcile, Sweep, PartitionIDs), reached by
// the suite and the bench through a Capture carried in Start's context.

package engine

import (
	"context"
)

// Reconcile scans the incoming table now (the periodic safety net), for
// tools and tests that cannot wait for the next scan.
func (o *Outbox) Reconcile(ctx context.Context) error { return o.seq.Reconcile(ctx) }

// Sweep runs one vacuum pass now and returns the messages it pruned.
func (o *Outbox) Sweep(ctx context.Context) (int, error) { return o.vac.Sweep(ctx) }

// PartitionIDs returns a registered queue's partition row ids (tests, tools).
func (o *Outbox) PartitionIDs(queue string) []int64 {
	if q := o.queues[queue]; q != nil {
		return append([]int64(nil), q.ids...)
	}
	return nil
}

// captureKey carries a Capture through a Start context.
type captureKey struct{}

// Capture receives the engine behind a seqbox.Outbox started with a
// context from WithCapture: the suite's and the bench's way to reach
// Sweep, Reconcile and PartitionIDs, which are no part of the public API.
type Capture struct{ Outbox *Outbox }

// WithCapture returns ctx carrying c.
func WithCapture(ctx context.Context, c *Capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// Captured stores o in the Capture ctx carries, if any.
func Captured(ctx context.Context, o *Outbox) {
	if c, ok := ctx.Value(captureKey{}).(*Capture); ok && c != nil {
		c.Outbox = o
	}
}
