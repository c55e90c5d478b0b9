// Params and results of the Dialect's operations, one file per group of
// the interface: Dead-letter actions (seqbox.DeadLetters): filters, records and
// status changes.

package dialect

import (
	"time"

	"github.com/uptrace/bun"
)

// Dead-letter states (deadletter.Status): written pending; a replay makes
// it replayed and the replay's ack resolved; an operator may resolve or
// discard a pending one.
const (
	DeadLetterPending   = "pending"
	DeadLetterReplayed  = "replayed"
	DeadLetterResolved  = "resolved"
	DeadLetterDiscarded = "discarded"
)

// DeadLetterFilter selects dead letters: every set field must match.
type DeadLetterFilter struct {
	IDs []int64 // nil: any; empty: none
	// PartitionIDs: nil matches any partition, an empty list none (a
	// queue or partition that does not exist).
	PartitionIDs []int64
	Statuses     []string
	PayloadType  string
	MessageID    *MessageID
	FailedFrom   time.Time // inclusive; zero: unbounded
	FailedTo     time.Time // exclusive; zero: unbounded
	CompletedTo  time.Time // completed_at before it (purge); zero: unbounded
	// ErrorText matches letters whose last error contains it, byte for
	// byte (case-sensitive on every database); "": any.
	ErrorText string
	// Headers is a JSON object of headers that must all match exactly;
	// nil: any.
	Headers []byte
	// MaxID bounds ids from above (inclusive); 0: unbounded. A bulk action
	// confirmed after a preview passes the preview's highest id, so it
	// acts on no letter that arrived after the count it showed.
	MaxID int64
}

// DeadLetterListParams lists dead letters in id order.
type DeadLetterListParams struct {
	// Conn is the connection to read on; nil reads on the database. With
	// Lock it is the transaction that holds the rows' locks until it ends.
	Conn    bun.IConn
	Filter  DeadLetterFilter
	AfterID int64 // keyset pagination: ids above it
	Limit   int   // 0: no limit
	Lock    bool
	// IDsOnly reads only ids and statuses (bulk actions, purge).
	IDsOnly bool
}

// DeadLetterRecord is a stored dead letter.
type DeadLetterRecord struct {
	ID          int64
	PartitionID int64
	Seq         int64
	MessageID   MessageID
	Key         string
	PayloadType string
	Payload     []byte
	Headers     []byte // JSON object text, or nil
	CreatedAt   time.Time
	FailedAt    time.Time
	LastError   string
	Attempts    int
	Status      string
	Note        string
	CompletedAt *time.Time
	ReplayID    *MessageID
}

// DeadLetterTallyParams counts the dead letters a filter matches, by status.
type DeadLetterTallyParams struct {
	Filter DeadLetterFilter
}

// DeadLetterTally is what DeadLetterTally read: the count of each status
// that has letters, and the highest id among them (0: none).
type DeadLetterTally struct {
	ByStatus map[string]int64
	MaxID    int64
}

// DeadLetterUpdateParams moves letters from one status to another on
// Conn, only those still in From: of two operators, one wins.
type DeadLetterUpdateParams struct {
	Conn bun.IConn
	IDs  []int64
	From string
	To   string
	Note string // stored when not empty
	// ReplayIDs, parallel to IDs, are the replay copies' ids (To replayed).
	ReplayIDs []MessageID
}

// DeadLetterDeleteParams deletes letters by id on Conn (purge).
type DeadLetterDeleteParams struct {
	Conn bun.IConn
	IDs  []int64
}
