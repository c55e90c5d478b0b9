// Params and results of the Dialect's operations, one file per group of
// the interface: Enqueue and registration (the engine): queues, message rows, dedup
// claims, purge, pending messages.

package dialect

import (
	"time"

	"github.com/uptrace/bun"
)

// QueueRegisterParams lists the queues to register, all or none.
type QueueRegisterParams struct {
	Queues []QueueDef
}

// QueueDef names a queue and its fixed partition count.
type QueueDef struct {
	Queue      string
	Partitions int
}

// MessageRow is one validated message ready to insert.
type MessageRow struct {
	ID          MessageID
	PartitionID int64
	// Key is the message's key, stored with it ("" is none).
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte // JSON object text, or nil
}

// MessageInsertManyParams is one enqueue: its rows, in order, and the
// bounds of one statement; the dialect splits the rows into chunks.
type MessageInsertManyParams struct {
	// Conn is the caller's connection or transaction.
	Conn bun.IConn
	Rows []MessageRow
	// ChunkRows and ChunkBytes bound one multi-row statement: its rows and
	// the size of its SQL text as the dialect estimates it.
	ChunkRows, ChunkBytes int
}

// DedupClaimParams claims dedup keys of one queue for an enqueue.
type DedupClaimParams struct {
	// Conn is the caller's connection or transaction.
	Conn  bun.IConn
	Queue string
	// Window is how long a new claim lasts.
	Window time.Duration
	// Claims have distinct keys.
	Claims []DedupClaim
}

// DedupClaim is one message's claim of its dedup key.
type DedupClaim struct {
	Key string
	ID  MessageID
}

// PurgeParams purges one partition's messages whose headers match
// (docs/ARCHITECTURE.md, "Purge").
type PurgeParams struct {
	PartitionID int64
	// Headers must all match; at least one.
	Headers []Header
	// Limit bounds the rows one call takes from each stage.
	Limit int
	// LeaseWindow: while the partition's lease is live, the seqs up to its
	// cursor plus the lease's batch limit may be in the batch being
	// delivered, and are left to that delivery (counted as InFlight);
	// LeaseWindow is that limit for a lease that did not record one.
	LeaseWindow int
}

// PurgePreviewParams counts, for every partition of Queue, the messages a
// purge by Headers would take now, changing nothing, in one statement:
// one snapshot, so a message the sequencer moves meanwhile is counted once.
type PurgePreviewParams struct {
	Queue       string
	Headers     []Header
	LeaseWindow int // as PurgeParams.LeaseWindow
}

// Header is one header name and value.
type Header struct{ Key, Value string }

// PurgeResult is what one PurgePartition call did.
type PurgeResult struct {
	// Incoming messages (not sequenced yet) were deleted.
	Incoming int
	// Outgoing messages (sequenced, not yet delivered) became tombstones.
	Outgoing int
	// InFlight matching messages may be in a batch being delivered now.
	InFlight int
	// More: a stage reached Limit; call again.
	More bool
}

// MessagePendingListParams are the message ids to look up.
type MessagePendingListParams struct {
	IDs []MessageID
}
