// Package outbox is seqbox's vocabulary: the messages an application
// enqueues, what an enqueue returns, the state Stats reports, purge
// filters, message ids and the errors of enqueueing. The handle that does
// the work is seqbox.Outbox.
package outbox

import (
	"cmp"
	"slices"
	"time"
)

// Message is one message to enqueue.
type Message struct {
	// Key, when set, picks the partition: PartitionForKey(Key, n), so every
	// message of one key stays in order. Leave Partition zero then.
	Key string
	// Partition is the 0-based partition when Key is empty.
	Partition int
	// PayloadType names the payload's format (1..255 printable ASCII), e.g.
	// "order.created.v1".
	PayloadType string
	Payload     []byte
	// Headers travel with the message (stored as a JSON object). Keys and
	// values must be valid UTF-8 (ErrInvalidHeaders otherwise); they are
	// delivered exactly as given.
	Headers map[string]string
	// DedupKey, when set, makes the enqueue idempotent: a message whose
	// DedupKey was enqueued to the same queue within the queue's dedup
	// window (processor.DedupWindow, default 24h) is not written again, and
	// the enqueue returns the first message's id (EnqueueResult says it was
	// a duplicate). At most 255 bytes of valid UTF-8.
	DedupKey string
}

// Enqueued is what an enqueue did with one message.
type Enqueued struct {
	// ID is the message's id; for a duplicate, the id of the message that
	// holds its DedupKey.
	ID MessageID
	// Duplicate: the message's DedupKey was enqueued to the queue within
	// the queue's dedup window, or earlier in the same batch, so this
	// message was not written.
	Duplicate bool
}

// Counters are this process's pipeline counts since Start.
type Counters struct {
	// Enqueued counts messages written by Enqueue calls, including those
	// whose caller-owned transaction later rolled back.
	Enqueued int64
	// Duplicates counts messages not written because their DedupKey was
	// taken (the same caveat applies).
	Duplicates   int64
	Sequenced    int64
	Delivered    int64
	Retried      int64
	DeadLettered int64
	// Parked counts partitions this process parked (the Park policy).
	Parked int64
	// Purged counts purged messages this process's processors passed
	// over (they had a seq already; see Purge) without a handler call.
	Purged int64
	// Vacuumed counts messages this process's vacuum pruned row by row.
	Vacuumed int64
	// DedupKeysExpired counts dedup keys this process's vacuum pruned.
	DedupKeysExpired int64
	// GenerationsTruncated counts generations of the message tables this
	// process's vacuum truncated whole, every message in them acked
	// (see Builder.RotateInterval).
	GenerationsTruncated int64
}

// PartitionStats is one partition's state in the database.
type PartitionStats struct {
	Queue     string
	Partition int
	// Incoming is the number of committed messages not yet sequenced.
	Incoming int64
	// Unprocessed is the number sequenced but not yet acked.
	Unprocessed int64
	// ProcessedSeq is the cursor; Sequence the last seq handed out.
	ProcessedSeq, Sequence int64
	// OldestIncoming is when the first unsequenced message in line (the
	// lowest incoming id) was enqueued, by the database clock; zero when
	// Incoming is 0.
	OldestIncoming time.Time
	// OldestUnprocessed is when the oldest message not yet acked was
	// enqueued, sequenced or not (the head of the partition's line); zero
	// when nothing waits. Now minus it is how far behind the partition is.
	OldestUnprocessed time.Time
	// Attempts and LastError describe a failing head message.
	Attempts      int
	LastError     string
	NextAttemptAt time.Time
	LockedUntil   time.Time
	// Parked: the head failed MaxAttempts times under the Park policy and
	// the partition waits for an operator (seqbox.Partitions) since ParkedAt.
	Parked   bool
	ParkedAt time.Time
	// DeadLetters counts dead letters by status.
	DeadLetters map[string]int64
}

// Retrying reports a partition whose head failed and will be retried: a
// failure was recorded (a lease alone counts an attempt too), and it is
// not parked.
func (p PartitionStats) Retrying() bool {
	return !p.Parked && (p.LastError != "" || !p.NextAttemptAt.IsZero())
}

// QueueStats sums one queue's partitions.
type QueueStats struct {
	Queue       string
	Partitions  int
	Incoming    int64
	Unprocessed int64
	// OldestUnprocessed is the earliest of its partitions'.
	OldestUnprocessed time.Time
	// Retrying counts partitions whose head failed and will be retried;
	// Parked those stopped at their head.
	Retrying, Parked int
	DeadLetters      map[string]int64
}

// Stats is a snapshot of the outbox.
type Stats struct {
	Partitions []PartitionStats
	// Queues are the per-queue totals of Partitions, by queue name.
	Queues   []QueueStats
	Counters Counters
}

// QueueTotals sums partitions' figures per queue, in queue-name order.
func QueueTotals(ps []PartitionStats) []QueueStats {
	var out []QueueStats
	index := map[string]int{}
	for _, p := range ps {
		i, ok := index[p.Queue]
		if !ok {
			i = len(out)
			index[p.Queue] = i
			out = append(out, QueueStats{Queue: p.Queue, DeadLetters: map[string]int64{}})
		}
		q := &out[i]
		q.Partitions++
		q.Incoming += p.Incoming
		q.Unprocessed += p.Unprocessed
		q.OldestUnprocessed = earliest(q.OldestUnprocessed, p.OldestUnprocessed)
		switch {
		case p.Parked:
			q.Parked++
		case p.Retrying():
			q.Retrying++
		}
		for st, n := range p.DeadLetters {
			q.DeadLetters[st] += n
		}
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	return out
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
