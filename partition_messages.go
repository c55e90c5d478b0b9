package seqbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
)

// QueuedMessage is a sequenced message waiting in a partition, as an
// operator sees it.
type QueuedMessage struct {
	Seq         int64
	ID          outbox.MessageID
	Key         string
	PayloadType string
	Payload     []byte
	Headers     map[string]string
	EnqueuedAt  time.Time
	// Purged: a tombstone left by Purge; the processor passes over it.
	Purged bool
}

// Message read bounds.
const (
	DefaultMessagesLimit = 20
	MaxMessagesLimit     = 1000
)

// Messages reads up to limit of a partition's undelivered messages from
// its head, the next one to be delivered, in seq order (limit <= 0:
// DefaultMessagesLimit; at most MaxMessagesLimit). It reads without
// locking: a snapshot that may be a delivery behind. Messages committed
// but not sequenced yet are not in partition order, so they are not
// listed; PartitionStats.Incoming counts them.
func (a *Partitions) Messages(ctx context.Context, queue string, partition int, limit int) ([]QueuedMessage, error) {
	if limit <= 0 {
		limit = DefaultMessagesLimit
	}
	limit = min(limit, MaxMessagesLimit)
	pid, err := a.partitionID(ctx, queue, partition, "read")
	if err != nil {
		return nil, err
	}
	res, err := a.s.ProcessorAdminRead(ctx, &dialect.ProcessorAdminReadParams{PartitionID: pid})
	if err != nil {
		return nil, dialect.Wrap(err, fmt.Sprintf("read %s/%d", queue, partition))
	}
	if !res.Found {
		return nil, &PartitionError{Queue: queue, Partition: partition, Action: "read", Err: ErrUnknownPartition}
	}
	list, err := a.s.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: a.s.DB(), PartitionID: pid, AfterSeq: res.State.ProcessedSeq, Limit: limit})
	if err != nil {
		return nil, dialect.Wrap(err, fmt.Sprintf("read %s/%d messages", queue, partition))
	}
	out := make([]QueuedMessage, len(list))
	for i, m := range list {
		out[i] = QueuedMessage{Seq: m.Seq, ID: m.ID, Key: m.Key, PayloadType: m.PayloadType, Payload: m.Payload,
			EnqueuedAt: m.CreatedAt, Purged: m.Purged}
		if len(m.Headers) > 0 {
			_ = json.Unmarshal(m.Headers, &out[i].Headers) // written by seqbox from a map: always an object
		}
	}
	return out, nil
}
