package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/processor"
)

// ErrInvalidPurgeFilter matches every refused purge filter.
var ErrInvalidPurgeFilter = errors.New("seqbox: invalid purge filter")

// MaxPurgeHeaders bounds the headers of one PurgeFilter.
const MaxPurgeHeaders = 16

// PurgeFilter selects the messages a purge removes.
type PurgeFilter struct {
	// Headers must all match exactly (e.g. {"tenant": "42"}); at least one,
	// at most MaxPurgeHeaders, names non-empty, valid UTF-8.
	Headers map[string]string
}

// Validate checks the filter; the error matches ErrInvalidPurgeFilter.
func (f PurgeFilter) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPurgeFilter, fmt.Sprintf(format, args...))
	}
	switch {
	case len(f.Headers) == 0:
		return bad("no header to match (a purge of every message is not offered)")
	case len(f.Headers) > MaxPurgeHeaders:
		return bad("%d headers, at most %d", len(f.Headers), MaxPurgeHeaders)
	}
	for k, v := range f.Headers {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return bad("header %+q=%+q: names must be non-empty, names and values valid UTF-8", k, v)
		}
	}
	return nil
}

func (f PurgeFilter) headers() []dialect.Header {
	out := make([]dialect.Header, 0, len(f.Headers))
	for _, k := range slices.Sorted(maps.Keys(f.Headers)) {
		out = append(out, dialect.Header{Key: k, Value: f.Headers[k]})
	}
	return out
}

// PartitionPurge is what a purge did (or, previewed, would do) to one
// partition.
type PartitionPurge struct {
	Partition int
	// Incoming messages (not sequenced yet) deleted.
	Incoming int
	// Outgoing messages (sequenced, undelivered) made tombstones: the
	// processor passes over them (Counters.Purged), so seqs stay gap-free.
	Outgoing int
	// InFlight matching messages were in a batch being delivered when the
	// purge looked (a preview only: Purge waits for them to be delivered).
	InFlight int
}

// PurgeResult sums a purge over a queue's partitions.
type PurgeResult struct {
	Queue              string
	Incoming, Outgoing int
	InFlight           int
	// Partitions lists the partitions with anything to report.
	Partitions []PartitionPurge
}

// PurgeStore is what Purge needs from the SQL layer.
type PurgeStore interface {
	PartitionList(ctx context.Context, params *dialect.PartitionListParams) ([]dialect.PartitionInfo, error)
	PurgePartition(ctx context.Context, params *dialect.PurgeParams) (dialect.PurgeResult, error)
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
func Purge(ctx context.Context, s PurgeStore, queue string, f PurgeFilter) (PurgeResult, error) {
	return purge(ctx, s, queue, f, false)
}

// PreviewPurge counts what Purge would remove now, changing nothing.
func PreviewPurge(ctx context.Context, s PurgeStore, queue string, f PurgeFilter) (PurgeResult, error) {
	return purge(ctx, s, queue, f, true)
}

func purge(ctx context.Context, s PurgeStore, queue string, f PurgeFilter, dryRun bool) (PurgeResult, error) {
	res := PurgeResult{Queue: queue}
	if err := ValidateQueueName(queue); err != nil {
		return res, err
	}
	if err := f.Validate(); err != nil {
		return res, err
	}
	parts, err := s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return res, err
	}
	if len(parts) == 0 {
		return res, &QueueError{Queue: queue}
	}
	headers := f.headers()
	for _, part := range parts {
		pp := PartitionPurge{Partition: part.Partition}
		params := &dialect.PurgeParams{PartitionID: part.ID, Headers: headers, Limit: purgeChunk,
			LeaseWindow: processor.BatchSizeMax, DryRun: dryRun}
		for attempt := 1; ; {
			r, err := s.PurgePartition(ctx, params)
			pp.Incoming += r.Incoming
			pp.Outgoing += r.Outgoing
			pp.InFlight = r.InFlight
			if err != nil {
				res.add(pp)
				return res, fmt.Errorf("seqbox: purge of %s/%d: %w", queue, part.Partition, err)
			}
			if r.More {
				continue
			}
			if dryRun || r.InFlight == 0 {
				break
			}
			// A live lease may hold matching messages: let its delivery
			// finish, then look again (the cursor will have passed them,
			// or the lease will be gone and they are purged).
			if !lifecycle.Sleep(ctx, lifecycle.Backoff(attempt, 20*time.Millisecond, time.Second)) {
				res.add(pp)
				return res, fmt.Errorf("seqbox: purge of %s/%d: %d message(s) still in delivery: %w", queue, part.Partition, r.InFlight, ctx.Err())
			}
			attempt++
		}
		res.add(pp)
	}
	return res, nil
}

func (r *PurgeResult) add(pp PartitionPurge) {
	if pp.Incoming == 0 && pp.Outgoing == 0 && pp.InFlight == 0 {
		return
	}
	r.Incoming += pp.Incoming
	r.Outgoing += pp.Outgoing
	r.InFlight += pp.InFlight
	r.Partitions = append(r.Partitions, pp)
}

// Purge removes the queue's undelivered messages whose headers match f;
// see the package function Purge. The queue may be one this process does
// not register.
func (o *Outbox) Purge(ctx context.Context, queue string, f PurgeFilter) (PurgeResult, error) {
	return Purge(ctx, o.d, queue, f)
}

// PreviewPurge counts what Purge would remove now, changing nothing.
func (o *Outbox) PreviewPurge(ctx context.Context, queue string, f PurgeFilter) (PurgeResult, error) {
	return PreviewPurge(ctx, o.d, queue, f)
}
