package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/outbox"
)

// PurgeStore is what Purge needs from the SQL layer.
type PurgeStore interface {
	PartitionList(ctx context.Context, params *dialect.PartitionListParams) ([]dialect.PartitionInfo, error)
	PurgePartition(ctx context.Context, params *dialect.PurgeParams) (dialect.PurgeResult, error)
	PurgePreview(ctx context.Context, params *dialect.PurgePreviewParams) (map[int64]dialect.PurgeResult, error)
}

// purgeChunk bounds the rows of each stage in one purge transaction.
const purgeChunk = 1000

// Purge removes a queue's messages not yet delivered whose headers match
// f, from both stages, while the pipeline runs (docs/ARCHITECTURE.md,
// "Purge"): unsequenced ones are deleted, sequenced ones become tombstones
// that the processor passes over without a handler call. A message being
// delivered when the purge reaches its partition is left to that delivery,
// and Purge waits until it is done: each matching message is either
// purged (and counted here) or delivered, never both. If ctx ends first,
// Purge returns what it did with the context's error.
func Purge(ctx context.Context, s PurgeStore, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	res, parts, headers, err := purgeStart(ctx, s, queue, f)
	if err != nil {
		return res, err
	}
	for _, part := range parts {
		pp := outbox.PartitionPurge{Partition: part.Partition}
		params := &dialect.PurgeParams{PartitionID: part.ID, Headers: headers, Limit: purgeChunk, LeaseWindow: handling.BatchSizeMax}
		for attempt := 1; ; {
			r, err := s.PurgePartition(ctx, params)
			pp.Incoming += r.Incoming
			pp.Outgoing += r.Outgoing
			pp.InFlight = r.InFlight
			if err != nil {
				addPurge(&res, pp)
				return res, dialect.Wrap(err, fmt.Sprintf("purge of %s/%d", queue, part.Partition))
			}
			if r.More {
				continue
			}
			if r.InFlight == 0 {
				break
			}
			// A live lease may hold matching messages: let its delivery
			// finish, then look again (the cursor will have passed them,
			// or the lease will be gone and they are purged).
			if !lifecycle.Sleep(ctx, lifecycle.Backoff(attempt, 20*time.Millisecond, time.Second)) {
				addPurge(&res, pp)
				return res, fmt.Errorf("seqbox: purge of %s/%d: %d message(s) still in delivery: %w", queue, part.Partition, r.InFlight, ctx.Err())
			}
			attempt++
		}
		addPurge(&res, pp)
	}
	return res, nil
}

// PreviewPurge counts what Purge would remove now, changing nothing, in
// one statement over the queue's partitions (one snapshot).
func PreviewPurge(ctx context.Context, s PurgeStore, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	res, parts, headers, err := purgeStart(ctx, s, queue, f)
	if err != nil {
		return res, err
	}
	counts, err := s.PurgePreview(ctx, &dialect.PurgePreviewParams{Queue: queue, Headers: headers, LeaseWindow: handling.BatchSizeMax})
	if err != nil {
		return res, dialect.Wrap(err, fmt.Sprintf("preview purge of %s", queue))
	}
	for _, part := range parts {
		c := counts[part.ID]
		addPurge(&res, outbox.PartitionPurge{Partition: part.Partition, Incoming: c.Incoming, Outgoing: c.Outgoing, InFlight: c.InFlight})
	}
	return res, nil
}

// purgeStart checks the queue and filter and lists the queue's partitions.
func purgeStart(ctx context.Context, s PurgeStore, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, []dialect.PartitionInfo, []dialect.Header, error) {
	res := outbox.PurgeResult{Queue: queue}
	if err := outbox.ValidateQueueName(queue); err != nil {
		return res, nil, nil, err
	}
	if err := f.Validate(); err != nil {
		return res, nil, nil, err
	}
	parts, err := s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return res, nil, nil, err
	}
	if len(parts) == 0 {
		return res, nil, nil, &outbox.QueueError{Queue: queue}
	}
	return res, parts, purgeHeaders(f), nil
}

func addPurge(r *outbox.PurgeResult, pp outbox.PartitionPurge) {
	if pp.Incoming == 0 && pp.Outgoing == 0 && pp.InFlight == 0 {
		return
	}
	r.Incoming += pp.Incoming
	r.Outgoing += pp.Outgoing
	r.InFlight += pp.InFlight
	r.Partitions = append(r.Partitions, pp)
}

// purgeHeaders are the filter's headers in name order.
func purgeHeaders(f outbox.PurgeFilter) []dialect.Header {
	out := make([]dialect.Header, 0, len(f.Headers))
	for _, k := range slices.Sorted(maps.Keys(f.Headers)) {
		out = append(out, dialect.Header{Key: k, Value: f.Headers[k]})
	}
	return out
}
