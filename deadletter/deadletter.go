// Package deadletter holds the types of seqbox's dead-letter operations
// (seqbox.DeadLetters): a dead letter is a self-contained copy of a message
// that will not be retried, written in the same transaction that moves its
// partition past it. Select letters by id (IDs) or by filter (Matching).
package deadletter

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/outbox"
)

// Status is a dead letter's state, as stored in its status column.
type Status string

// DefaultPageSize is DeadLetters.List's page size when the limit is not positive.
const DefaultPageSize = 100

// MaxErrorLen bounds the stored error text.
const MaxErrorLen = 4096

// Dead-letter states (docs/ARCHITECTURE.md, "Dead letters"): pending when
// written; replayed once a copy was enqueued, resolved when that copy is
// acked; resolved or discarded by an operator from pending.
const (
	StatusPending   Status = "pending"
	StatusReplayed  Status = "replayed"
	StatusResolved  Status = "resolved"
	StatusDiscarded Status = "discarded"
)

// ReplayOfHeader names, on a replayed copy, the message id of the dead
// letter it replays (its canonical UUID text).
const ReplayOfHeader = "seqbox-replay-of"

// Errors of the operator actions, matched with errors.Is; each action
// that returns one has changed nothing.
var (
	// ErrNotFound: an id or message id names no dead letter.
	ErrNotFound = errors.New("seqbox: dead letter not found")
	// ErrNoMatch: a filter matched no dead letter the action applies to.
	ErrNoMatch = errors.New("seqbox: no dead letter matches")
	// ErrWrongStatus: a letter is not in a status the action applies to
	// (replayed, resolved or discarded already; for example by another
	// operator a moment earlier). Its *StatusError names the letter.
	ErrWrongStatus = errors.New("seqbox: dead letter is not in a status this action applies to")
	// ErrInvalidSelection: a selection with both ids and a filter, or
	// with neither, or a filter naming partitions without a queue.
	ErrInvalidSelection = errors.New("seqbox: invalid dead-letter selection")
)

// StatusError is ErrWrongStatus for one letter.
type StatusError struct {
	ID     int64
	Status Status
	Action string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("seqbox: cannot %s dead letter %d: it is %s", e.Action, e.ID, e.Status)
}

// Is makes errors.Is(err, ErrWrongStatus) true.
func (e *StatusError) Is(target error) bool { return target == ErrWrongStatus }

// Filter selects dead letters: every set field must match; the zero
// Filter matches all.
type Filter struct {
	Queue string
	// Partitions are partition numbers of Queue (Queue is then required).
	Partitions  []int
	Statuses    []Status
	PayloadType string
	// FailedFrom (inclusive) and FailedTo (exclusive) bound when the
	// message was dead-lettered.
	FailedFrom, FailedTo time.Time
}

// Selection is what an action applies to: ids, or a filter (bulk).
type Selection struct {
	IDs    []int64
	Filter *Filter
}

// IDs selects letters by id.
func IDs(ids ...int64) Selection { return Selection{IDs: ids} }

// Matching selects every letter a filter matches.
func Matching(f Filter) Selection { return Selection{Filter: &f} }

// Letter is a dead letter as an operator sees it.
type Letter struct {
	ID        int64 // the dead letter's own id
	Queue     string
	Partition int
	Seq       int64 // the message's seq in its partition when it failed
	MessageID outbox.MessageID
	// Key is the message's Key ("" when it had none); a replay keeps it.
	Key         string
	PayloadType string
	Payload     []byte
	Headers     map[string]string
	EnqueuedAt  time.Time
	FailedAt    time.Time
	LastError   string
	Attempts    int
	Status      Status
	// Note is the operator's note (resolve) or reason (discard).
	Note        string
	CompletedAt *time.Time
	// ReplayID is the id of the copy a replay enqueued.
	ReplayID *outbox.MessageID
}

// Page is one page of List; Next is the After of the next page, zero
// after the last.
type Page struct {
	Letters []Letter
	Next    int64
}

// Changed is what an action did: the letters it moved (or deleted), in id
// order, and for a replay the copies' message ids, parallel to IDs.
type Changed struct {
	IDs       []int64
	ReplayIDs []outbox.MessageID
}
