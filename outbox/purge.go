package outbox

import (
	"errors"
	"fmt"
	"unicode/utf8"
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
