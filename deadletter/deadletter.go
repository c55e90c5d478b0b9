// Package deadletter holds the types of seqbox's dead-letter operations
// (seqbox.DeadLetters): a dead letter is a self-contained copy of a message
// that will not be retried, written in the same transaction that moves its
// partition past it. Select letters by id (IDs) or by filter (Matching).
package deadletter

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

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
	// with neither, or a filter that Filter.Validate refuses.
	ErrInvalidSelection = errors.New("seqbox: invalid dead-letter selection")
	// ErrCountChanged: a selection made conditional (Selection.Expect)
	// no longer holds the count shown. Its *CountError says both.
	ErrCountChanged = errors.New("seqbox: dead-letter selection changed since it was counted")
)

// CountError: a selection made conditional with Expect held another
// number of letters when the action ran (another operator acted, or
// letters were dead-lettered since); nothing was changed.
type CountError struct {
	Action          string
	Expected, Found int
}

func (e *CountError) Error() string {
	return fmt.Sprintf("seqbox: %s not done: %d dead letters were shown, %d match now", e.Action, e.Expected, e.Found)
}

func (e *CountError) Is(target error) bool { return target == ErrCountChanged }

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
	// ErrorContains matches letters whose last error contains it, byte for
	// byte (case-sensitive on every database); "": any.
	ErrorContains string
	// Headers must all match exactly (e.g. {"tenant": "42"}); at most
	// MaxFilterHeaders. Nil or empty: any.
	Headers map[string]string
	// MaxID, when not 0, bounds the letters' ids from above (inclusive).
	// A UI that showed a count passes the highest id it counted, so a
	// bulk action confirmed later acts on no letter that arrived since.
	MaxID int64
}

// Tally is what a filter matches: the count of each status that has
// letters, their total, and the highest id among them (0: none).
type Tally struct {
	ByStatus map[Status]int64
	Total    int64
	MaxID    int64
}

// MaxFilterHeaders bounds Filter.Headers.
const MaxFilterHeaders = 16

// Validate checks a filter; the error matches ErrInvalidSelection. Text
// from outside (error text, headers) must be valid UTF-8 without NUL
// bytes, which no database stores in text and JSON alike.
func (f Filter) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSelection, fmt.Sprintf(format, args...))
	}
	text := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
	switch {
	case f.Queue == "" && len(f.Partitions) > 0:
		return bad("partitions need a queue")
	case !text(f.ErrorContains) || len(f.ErrorContains) > MaxErrorLen:
		return bad("error text must be valid UTF-8 without NUL, at most %d bytes", MaxErrorLen)
	case len(f.Headers) > MaxFilterHeaders:
		return bad("%d headers, at most %d", len(f.Headers), MaxFilterHeaders)
	case f.MaxID < 0:
		return bad("max id %d is negative", f.MaxID)
	case !f.FailedFrom.IsZero() && !f.FailedTo.IsZero() && !f.FailedFrom.Before(f.FailedTo):
		return bad("failed-from %s is not before failed-to %s", f.FailedFrom.Format(time.RFC3339), f.FailedTo.Format(time.RFC3339))
	}
	for _, p := range f.Partitions {
		if p < 0 {
			return bad("partition %d is negative", p)
		}
	}
	for _, s := range f.Statuses {
		switch s {
		case StatusPending, StatusReplayed, StatusResolved, StatusDiscarded:
		default:
			return bad("unknown status %+q", string(s))
		}
	}
	for k, v := range f.Headers {
		if k == "" || !text(k) || !text(v) {
			return bad("header %+q=%+q: names must be non-empty, names and values valid UTF-8 without NUL", k, v)
		}
	}
	return nil
}

// Selection is what an action applies to: ids, or a filter (bulk).
type Selection struct {
	IDs    []int64
	Filter *Filter
	// Expect, when not 0, makes the action conditional on the count an
	// operator was shown: if, under the rows' locks, the selection does
	// not hold exactly Expect letters the action applies to, it changes
	// nothing and returns a *CountError (ErrCountChanged).
	Expect int
}

// Expecting returns the selection conditional on n letters (Expect).
func (s Selection) Expecting(n int) Selection {
	s.Expect = n
	return s
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
