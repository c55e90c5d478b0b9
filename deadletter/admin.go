package deadletter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// Dead-letter states (docs/ARCHITECTURE.md, "Dead letters"): pending when
// written; replayed once a copy was enqueued, resolved when that copy is
// acked; resolved or discarded by an operator from pending.
const (
	StatusReplayed  Status = dialect.DeadLetterReplayed
	StatusResolved  Status = dialect.DeadLetterResolved
	StatusDiscarded Status = dialect.DeadLetterDiscarded
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
	MessageID dialect.MessageID
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
	ReplayID *dialect.MessageID
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
	ReplayIDs []dialect.MessageID
}

// Store is what Admin needs from the SQL layer (dialect.Dialect has it).
type Store interface {
	Name() dialect.Name
	RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error
	DeadLetterList(ctx context.Context, params *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error)
	DeadLetterTally(ctx context.Context, params *dialect.DeadLetterTallyParams) (map[string]int64, error)
	DeadLetterUpdate(ctx context.Context, params *dialect.DeadLetterUpdateParams) (int, error)
	DeadLetterDelete(ctx context.Context, params *dialect.DeadLetterDeleteParams) (int, error)
	PartitionList(ctx context.Context, params *dialect.PartitionListParams) ([]dialect.PartitionInfo, error)
	MessageInsertMany(ctx context.Context, params *dialect.MessageInsertManyParams) error
}

// Admin lists dead letters and acts on them. It needs no running
// pipeline: a CLI or an admin service builds one from a database and a
// table prefix (seqbox.DeadLetters), an application from its Outbox.
type Admin struct {
	s Store
	// replayed, when set, is told the partitions a replay enqueued into
	// after its commit (the local pipeline picks them up at once).
	replayed func(partitionIDs []int64)
}

// NewAdmin builds an Admin over a store; replayed may be nil.
func NewAdmin(s Store, replayed func(partitionIDs []int64)) *Admin {
	return &Admin{s: s, replayed: replayed}
}

// DefaultPageSize is List's page size when the limit is not positive.
const DefaultPageSize = 100

// List returns the letters a filter matches with ids above after, in id
// order (keyset pagination: pass Page.Next as the next call's after).
func (a *Admin) List(ctx context.Context, f Filter, after int64, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	parts, df, err := a.filter(ctx, f)
	if err != nil {
		return Page{}, err
	}
	recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Filter: df, AfterID: after, Limit: limit})
	if err != nil {
		return Page{}, fmt.Errorf("seqbox: list dead letters: %w", err)
	}
	page := Page{Letters: make([]Letter, len(recs))}
	for i := range recs {
		page.Letters[i] = letter(&recs[i], parts)
	}
	if len(recs) == limit {
		page.Next = recs[len(recs)-1].ID
	}
	return page, nil
}

// Count returns how many letters a filter matches, by status.
func (a *Admin) Count(ctx context.Context, f Filter) (map[Status]int64, error) {
	_, df, err := a.filter(ctx, f)
	if err != nil {
		return nil, err
	}
	tally, err := a.s.DeadLetterTally(ctx, &dialect.DeadLetterTallyParams{Filter: df})
	if err != nil {
		return nil, fmt.Errorf("seqbox: count dead letters: %w", err)
	}
	out := make(map[Status]int64, len(tally))
	for s, n := range tally {
		out[Status(s)] = n
	}
	return out, nil
}

// Get returns the dead letter of a message id (ErrNotFound if none).
func (a *Admin) Get(ctx context.Context, messageID dialect.MessageID) (Letter, error) {
	recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{MessageID: &messageID}, Limit: 1})
	if err != nil {
		return Letter{}, fmt.Errorf("seqbox: get dead letter: %w", err)
	}
	if len(recs) == 0 {
		return Letter{}, fmt.Errorf("%w: message %s", ErrNotFound, messageID.String())
	}
	parts, err := a.partitions(ctx, "")
	if err != nil {
		return Letter{}, err
	}
	return letter(&recs[0], parts), nil
}

// Replay enqueues a copy of each selected pending letter at the tail of
// its original partition (same queue and partition, a new message id, the
// header ReplayOfHeader naming the original), in the order the originals
// had there, and marks the letters replayed, all in one transaction. When
// a copy is acked its letter becomes resolved.
func (a *Admin) Replay(ctx context.Context, sel Selection) (Changed, error) {
	var out Changed
	var pids []int64
	err := a.act(ctx, sel, "replay", func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error {
		ids := make([][16]byte, len(recs))
		if err := uuidv7.Fill(ids, time.Now()); err != nil {
			return err
		}
		// Reported in id order, as recs come; enqueued in the originals'
		// partition order, so the copies keep it.
		out = Changed{IDs: make([]int64, len(recs)), ReplayIDs: make([]dialect.MessageID, len(recs))}
		rows := make([]dialect.MessageRow, len(recs))
		for i, r := range recs {
			headers, err := replayHeaders(r.Headers, r.MessageID)
			if err != nil {
				return fmt.Errorf("seqbox: dead letter %d: %w", r.ID, err)
			}
			rows[i] = dialect.MessageRow{ID: ids[i], PartitionID: r.PartitionID, Key: r.Key, PayloadType: r.PayloadType, Payload: r.Payload, Headers: headers}
			out.IDs[i], out.ReplayIDs[i] = r.ID, ids[i]
			if !slices.Contains(pids, r.PartitionID) {
				pids = append(pids, r.PartitionID)
			}
		}
		seqOf := make(map[dialect.MessageID]int64, len(recs))
		for i, r := range recs {
			seqOf[ids[i]] = r.Seq
		}
		slices.SortStableFunc(rows, func(x, y dialect.MessageRow) int {
			return cmp.Or(cmp.Compare(x.PartitionID, y.PartitionID), cmp.Compare(seqOf[x.ID], seqOf[y.ID]))
		})
		if err := a.s.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows,
			ChunkRows: replayChunkRows, ChunkBytes: replayChunkBytes}); err != nil {
			return err
		}
		return a.update(ctx, &dialect.DeadLetterUpdateParams{Conn: tx, IDs: out.IDs, From: dialect.DeadLetterPending,
			To: dialect.DeadLetterReplayed, ReplayIDs: out.ReplayIDs})
	})
	if err != nil {
		return Changed{}, err
	}
	if a.replayed != nil {
		a.replayed(pids)
	}
	return out, nil
}

// The chunk bounds of a replay's enqueue (the library's defaults).
const (
	replayChunkRows  = 1000
	replayChunkBytes = 4 << 20
)

// Resolve marks the selected pending letters as handled by hand.
func (a *Admin) Resolve(ctx context.Context, sel Selection, note string) (Changed, error) {
	return a.setStatus(ctx, sel, "resolve", dialect.DeadLetterResolved, note)
}

// Discard marks the selected pending letters as not to be handled.
func (a *Admin) Discard(ctx context.Context, sel Selection, reason string) (Changed, error) {
	return a.setStatus(ctx, sel, "discard", dialect.DeadLetterDiscarded, reason)
}

func (a *Admin) setStatus(ctx context.Context, sel Selection, action, to, note string) (Changed, error) {
	var out Changed
	err := a.act(ctx, sel, action, func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error {
		out = Changed{IDs: make([]int64, len(recs))}
		for i, r := range recs {
			out.IDs[i] = r.ID
		}
		return a.update(ctx, &dialect.DeadLetterUpdateParams{Conn: tx, IDs: out.IDs, From: dialect.DeadLetterPending, To: to, Note: note})
	})
	return out, err
}

// Purge deletes resolved and discarded letters that reached that state
// before cutoff, among those the filter matches (its Statuses may narrow
// to one of the two), and returns their ids.
func (a *Admin) Purge(ctx context.Context, f Filter, cutoff time.Time) (Changed, error) {
	for _, s := range f.Statuses {
		if s != StatusResolved && s != StatusDiscarded {
			return Changed{}, fmt.Errorf("%w: purge deletes only resolved or discarded letters, not %s", ErrInvalidSelection, s)
		}
	}
	if len(f.Statuses) == 0 {
		f.Statuses = []Status{StatusResolved, StatusDiscarded}
	}
	_, df, err := a.filter(ctx, f)
	if err != nil {
		return Changed{}, err
	}
	df.CompletedTo = cutoff
	var out Changed
	err = a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = Changed{}
		recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Conn: tx, Filter: df, Lock: true, IDsOnly: true})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return ErrNoMatch
		}
		for _, r := range recs {
			out.IDs = append(out.IDs, r.ID)
		}
		_, err = a.s.DeadLetterDelete(ctx, &dialect.DeadLetterDeleteParams{Conn: tx, IDs: out.IDs})
		return err
	})
	if err != nil {
		return Changed{}, wrapAction("purge", err)
	}
	return out, nil
}

// act runs fn in one transaction over the selected letters, locked and all
// pending; anything else changes nothing and returns a typed error.
func (a *Admin) act(ctx context.Context, sel Selection, action string, fn func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error) error {
	var df dialect.DeadLetterFilter
	switch {
	case (sel.IDs == nil) == (sel.Filter == nil):
		return fmt.Errorf("%w: give ids or a filter, not both or neither", ErrInvalidSelection)
	case sel.IDs != nil:
		if len(sel.IDs) == 0 {
			return fmt.Errorf("%w: no ids", ErrInvalidSelection)
		}
		df.IDs = sel.IDs
	default:
		f := *sel.Filter
		for _, s := range f.Statuses {
			if s != StatusPending {
				return fmt.Errorf("%w: only pending letters can be acted on, not %s", ErrInvalidSelection, s)
			}
		}
		f.Statuses = []Status{StatusPending}
		var err error
		if _, df, err = a.filter(ctx, f); err != nil {
			return err
		}
	}
	err := a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Conn: tx, Filter: df, Lock: true})
		if err != nil {
			return err
		}
		if sel.IDs != nil {
			if err := checkIDs(sel.IDs, recs, action); err != nil {
				return err
			}
		} else if len(recs) == 0 {
			return ErrNoMatch
		}
		return fn(ctx, tx, recs)
	})
	return wrapAction(action, err)
}

// checkIDs reports the first id that is missing or not pending.
func checkIDs(ids []int64, recs []dialect.DeadLetterRecord, action string) error {
	found := make(map[int64]string, len(recs))
	for _, r := range recs {
		found[r.ID] = r.Status
	}
	for _, id := range ids {
		status, ok := found[id]
		switch {
		case !ok:
			return fmt.Errorf("%w: id %d", ErrNotFound, id)
		case status != dialect.DeadLetterPending:
			return &StatusError{ID: id, Status: Status(status), Action: action}
		}
	}
	return nil
}

// update moves letters and insists that every one moved: they are locked
// and were read pending in this transaction, so a shortfall is a bug.
func (a *Admin) update(ctx context.Context, p *dialect.DeadLetterUpdateParams) error {
	n, err := a.s.DeadLetterUpdate(ctx, p)
	if err != nil {
		return err
	}
	if n != len(p.IDs) {
		return fmt.Errorf("seqbox: %d of %d dead letters changed under a row lock", n, len(p.IDs))
	}
	return nil
}

func wrapAction(action string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoMatch) || errors.Is(err, ErrWrongStatus) {
		return err
	}
	return fmt.Errorf("seqbox: %s dead letters: %w", action, err)
}

// filter resolves a Filter's queue and partition numbers to partition ids.
func (a *Admin) filter(ctx context.Context, f Filter) (map[int64]dialect.PartitionInfo, dialect.DeadLetterFilter, error) {
	df := dialect.DeadLetterFilter{PayloadType: f.PayloadType, FailedFrom: f.FailedFrom, FailedTo: f.FailedTo}
	for _, s := range f.Statuses {
		df.Statuses = append(df.Statuses, string(s))
	}
	if f.Queue == "" && len(f.Partitions) > 0 {
		return nil, df, fmt.Errorf("%w: partitions need a queue", ErrInvalidSelection)
	}
	parts, err := a.partitions(ctx, f.Queue)
	if err != nil {
		return nil, df, err
	}
	if f.Queue != "" {
		df.PartitionIDs = []int64{} // a queue that does not exist matches nothing
		for id, p := range parts {
			if len(f.Partitions) == 0 || slices.Contains(f.Partitions, p.Partition) {
				df.PartitionIDs = append(df.PartitionIDs, id)
			}
		}
		slices.Sort(df.PartitionIDs)
	}
	return parts, df, nil
}

func (a *Admin) partitions(ctx context.Context, queue string) (map[int64]dialect.PartitionInfo, error) {
	list, err := a.s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return nil, fmt.Errorf("seqbox: list partitions: %w", err)
	}
	out := make(map[int64]dialect.PartitionInfo, len(list))
	for _, p := range list {
		out[p.ID] = p
	}
	return out, nil
}

func letter(r *dialect.DeadLetterRecord, parts map[int64]dialect.PartitionInfo) Letter {
	l := Letter{ID: r.ID, Seq: r.Seq, MessageID: r.MessageID, Key: r.Key, PayloadType: r.PayloadType, Payload: r.Payload,
		EnqueuedAt: r.CreatedAt, FailedAt: r.FailedAt, LastError: r.LastError, Attempts: r.Attempts,
		Status: Status(r.Status), Note: r.Note, CompletedAt: r.CompletedAt, ReplayID: r.ReplayID}
	if p, ok := parts[r.PartitionID]; ok {
		l.Queue, l.Partition = p.Queue, p.Partition
	}
	if len(r.Headers) > 0 {
		_ = json.Unmarshal(r.Headers, &l.Headers) // written by seqbox from a map: always an object
	}
	return l
}

// replayHeaders is the original's headers plus ReplayOfHeader.
func replayHeaders(original []byte, id dialect.MessageID) ([]byte, error) {
	h := map[string]string{}
	if len(original) > 0 {
		if err := json.Unmarshal(original, &h); err != nil {
			return nil, fmt.Errorf("headers are not a JSON object: %w", err)
		}
	}
	h[ReplayOfHeader] = id.String()
	return json.Marshal(h)
}
