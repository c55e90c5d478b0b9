package seqbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// DeadLetters lists dead letters and acts on them: replay, resolve,
// discard, purge (docs/ARCHITECTURE.md, "Dead letters"). Get it from
// Admin.DeadLetters. Every action takes ids or a filter
// (deadletter.IDs, deadletter.Matching), is atomic per call, and acts
// only on letters still in the status it applies to, so of two operators
// acting on one letter one wins and the other gets ErrWrongStatus.
type DeadLetters struct {
	s dialect.Dialect
	// replayed, when set, is told the partitions a replay enqueued into
	// after its commit (the local pipeline picks them up at once).
	replayed func(partitionIDs []int64)
}

// List returns the letters a filter matches with ids above after, in id
// order (keyset pagination: pass Page.Next as the next call's after).
func (a *DeadLetters) List(ctx context.Context, f deadletter.Filter, after int64, limit int) (deadletter.Page, error) {
	if limit <= 0 {
		limit = deadletter.DefaultPageSize
	}
	parts, df, err := a.filter(ctx, f)
	if err != nil {
		return deadletter.Page{}, err
	}
	recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Filter: df, AfterID: after, Limit: limit})
	if err != nil {
		return deadletter.Page{}, dialect.Wrap(err, "list dead letters")
	}
	page := deadletter.Page{Letters: make([]deadletter.Letter, len(recs))}
	for i := range recs {
		page.Letters[i] = letter(&recs[i], parts)
	}
	if len(recs) == limit {
		page.Next = recs[len(recs)-1].ID
	}
	return page, nil
}

// Count returns how many letters a filter matches, by status.
func (a *DeadLetters) Count(ctx context.Context, f deadletter.Filter) (map[deadletter.Status]int64, error) {
	t, err := a.Tally(ctx, f)
	return t.ByStatus, err
}

// Tally counts the letters a filter matches, by status, and reads the
// highest id among them: what a confirmation shows before a bulk action,
// which then sets Filter.MaxID to Tally.MaxID and Selection.Expect to
// the count, to act on exactly what was shown.
func (a *DeadLetters) Tally(ctx context.Context, f deadletter.Filter) (deadletter.Tally, error) {
	_, df, err := a.filter(ctx, f)
	if err != nil {
		return deadletter.Tally{}, err
	}
	t, err := a.s.DeadLetterTally(ctx, &dialect.DeadLetterTallyParams{Filter: df})
	if err != nil {
		return deadletter.Tally{}, dialect.Wrap(err, "count dead letters")
	}
	out := deadletter.Tally{ByStatus: make(map[deadletter.Status]int64, len(t.ByStatus)), MaxID: t.MaxID}
	for s, n := range t.ByStatus {
		out.ByStatus[deadletter.Status(s)] = n
		out.Total += n
	}
	return out, nil
}

// Get returns the dead letter of a message id (deadletter.ErrNotFound if none).
func (a *DeadLetters) Get(ctx context.Context, messageID dialect.MessageID) (deadletter.Letter, error) {
	recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{MessageID: &messageID}, Limit: 1})
	if err != nil {
		return deadletter.Letter{}, dialect.Wrap(err, "get dead letter")
	}
	if len(recs) == 0 {
		return deadletter.Letter{}, fmt.Errorf("%w: message %s", deadletter.ErrNotFound, messageID.String())
	}
	parts, err := a.partitions(ctx, "")
	if err != nil {
		return deadletter.Letter{}, err
	}
	return letter(&recs[0], parts), nil
}

// Replay enqueues a copy of each selected pending letter at the tail of
// its original partition (same queue and partition, a new message id, the
// header deadletter.ReplayOfHeader naming the original), in the order the originals
// had there, and marks the letters replayed, all in one transaction. When
// a copy is acked its letter becomes resolved.
func (a *DeadLetters) Replay(ctx context.Context, sel deadletter.Selection) (deadletter.Changed, error) {
	var out deadletter.Changed
	var pids []int64
	err := a.act(ctx, sel, "replay", func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error {
		ids := make([][16]byte, len(recs))
		if err := uuidv7.Fill(ids, time.Now()); err != nil {
			return err
		}
		// Reported in id order, as recs come; enqueued in the originals'
		// partition order, so the copies keep it.
		out = deadletter.Changed{IDs: make([]int64, len(recs)), ReplayIDs: make([]dialect.MessageID, len(recs))}
		rows := make([]dialect.MessageRow, len(recs))
		for i, r := range recs {
			headers, err := replayHeaders(r.Headers, r.MessageID)
			if err != nil {
				return dialect.Wrap(err, fmt.Sprintf("dead letter %d", r.ID))
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
		return deadletter.Changed{}, err
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
func (a *DeadLetters) Resolve(ctx context.Context, sel deadletter.Selection, note string) (deadletter.Changed, error) {
	return a.setStatus(ctx, sel, "resolve", dialect.DeadLetterResolved, note)
}

// Discard marks the selected pending letters as not to be handled.
func (a *DeadLetters) Discard(ctx context.Context, sel deadletter.Selection, reason string) (deadletter.Changed, error) {
	return a.setStatus(ctx, sel, "discard", dialect.DeadLetterDiscarded, reason)
}

func (a *DeadLetters) setStatus(ctx context.Context, sel deadletter.Selection, action, to, note string) (deadletter.Changed, error) {
	var out deadletter.Changed
	err := a.act(ctx, sel, action, func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error {
		out = deadletter.Changed{IDs: make([]int64, len(recs))}
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
func (a *DeadLetters) Purge(ctx context.Context, f deadletter.Filter, cutoff time.Time) (deadletter.Changed, error) {
	for _, s := range f.Statuses {
		if s != deadletter.StatusResolved && s != deadletter.StatusDiscarded {
			return deadletter.Changed{}, fmt.Errorf("%w: purge deletes only resolved or discarded letters, not %s", deadletter.ErrInvalidSelection, s)
		}
	}
	if len(f.Statuses) == 0 {
		f.Statuses = []deadletter.Status{deadletter.StatusResolved, deadletter.StatusDiscarded}
	}
	_, df, err := a.filter(ctx, f)
	if err != nil {
		return deadletter.Changed{}, err
	}
	df.CompletedTo = cutoff
	var out deadletter.Changed
	err = a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = deadletter.Changed{}
		recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Conn: tx, Filter: df, Lock: true, IDsOnly: true})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return deadletter.ErrNoMatch
		}
		for _, r := range recs {
			out.IDs = append(out.IDs, r.ID)
		}
		_, err = a.s.DeadLetterDelete(ctx, &dialect.DeadLetterDeleteParams{Conn: tx, IDs: out.IDs})
		return err
	})
	if err != nil {
		return deadletter.Changed{}, wrapAction("purge", err)
	}
	return out, nil
}

// act runs fn in one transaction over the selected letters, locked and all
// pending; anything else changes nothing and returns a typed error.
func (a *DeadLetters) act(ctx context.Context, sel deadletter.Selection, action string, fn func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error) error {
	var df dialect.DeadLetterFilter
	switch {
	case (sel.IDs == nil) == (sel.Filter == nil):
		return fmt.Errorf("%w: give ids or a filter, not both or neither", deadletter.ErrInvalidSelection)
	case sel.IDs != nil:
		if len(sel.IDs) == 0 {
			return fmt.Errorf("%w: no ids", deadletter.ErrInvalidSelection)
		}
		df.IDs = sel.IDs
	default:
		f := *sel.Filter
		for _, s := range f.Statuses {
			if s != deadletter.StatusPending {
				return fmt.Errorf("%w: only pending letters can be acted on, not %s", deadletter.ErrInvalidSelection, s)
			}
		}
		f.Statuses = []deadletter.Status{deadletter.StatusPending}
		var err error
		if _, df, err = a.filter(ctx, f); err != nil {
			return err
		}
	}
	// Two operators acting on overlapping letters can deadlock on InnoDB
	// (their row locks are taken through different index entries). The
	// transaction is all or nothing and re-reads under its locks, so it is
	// run again: the second operator then sees the first one's outcome
	// (CountError, ErrNoMatch) instead of a database error.
	var err error
	for attempt := 1; attempt <= actionAttempts; attempt++ {
		if err = a.actOnce(ctx, sel, df, action, fn); !errors.Is(err, dialect.ErrRetryable) ||
			!lifecycle.Sleep(ctx, lifecycle.Backoff(attempt, 10*time.Millisecond, 200*time.Millisecond)) {
			break
		}
	}
	return wrapAction(action, err)
}

// actionAttempts bounds the runs of a bulk action that keeps meeting
// retryable conflicts.
const actionAttempts = 5

// actOnce is one transaction of act.
func (a *DeadLetters) actOnce(ctx context.Context, sel deadletter.Selection, df dialect.DeadLetterFilter, action string,
	fn func(ctx context.Context, tx bun.Tx, recs []dialect.DeadLetterRecord) error) error {
	return a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		recs, err := a.s.DeadLetterList(ctx, &dialect.DeadLetterListParams{Conn: tx, Filter: df, Lock: true})
		if err != nil {
			return err
		}
		if sel.IDs != nil {
			if err := checkIDs(sel.IDs, recs, action); err != nil {
				return err
			}
		} else if len(recs) == 0 && sel.Expect == 0 {
			return deadletter.ErrNoMatch
		}
		if sel.Expect != 0 && len(recs) != sel.Expect {
			return &deadletter.CountError{Action: action, Expected: sel.Expect, Found: len(recs)}
		}
		return fn(ctx, tx, recs)
	})
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
			return fmt.Errorf("%w: id %d", deadletter.ErrNotFound, id)
		case status != dialect.DeadLetterPending:
			return &deadletter.StatusError{ID: id, Status: deadletter.Status(status), Action: action}
		}
	}
	return nil
}

// update moves letters and insists that every one moved: they are locked
// and were read pending in this transaction, so a shortfall is a bug.
func (a *DeadLetters) update(ctx context.Context, p *dialect.DeadLetterUpdateParams) error {
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
	if err == nil || errors.Is(err, deadletter.ErrNotFound) || errors.Is(err, deadletter.ErrNoMatch) ||
		errors.Is(err, deadletter.ErrWrongStatus) || errors.Is(err, deadletter.ErrCountChanged) {
		return err
	}
	return dialect.Wrap(err, fmt.Sprintf("%s dead letters", action))
}

// filter resolves a Filter's queue and partition numbers to partition ids.
func (a *DeadLetters) filter(ctx context.Context, f deadletter.Filter) (map[int64]dialect.PartitionInfo, dialect.DeadLetterFilter, error) {
	if err := f.Validate(); err != nil {
		return nil, dialect.DeadLetterFilter{}, err
	}
	df := dialect.DeadLetterFilter{PayloadType: f.PayloadType, FailedFrom: f.FailedFrom, FailedTo: f.FailedTo,
		ErrorText: f.ErrorContains, MaxID: f.MaxID}
	for _, s := range f.Statuses {
		df.Statuses = append(df.Statuses, string(s))
	}
	if len(f.Headers) > 0 {
		h, err := json.Marshal(f.Headers)
		if err != nil {
			return nil, df, fmt.Errorf("%w: headers: %w", deadletter.ErrInvalidSelection, err)
		}
		df.Headers = h
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

func (a *DeadLetters) partitions(ctx context.Context, queue string) (map[int64]dialect.PartitionInfo, error) {
	list, err := a.s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return nil, dialect.Wrap(err, "list partitions")
	}
	out := make(map[int64]dialect.PartitionInfo, len(list))
	for _, p := range list {
		out[p.ID] = p
	}
	return out, nil
}

func letter(r *dialect.DeadLetterRecord, parts map[int64]dialect.PartitionInfo) deadletter.Letter {
	l := deadletter.Letter{ID: r.ID, Seq: r.Seq, MessageID: r.MessageID, Key: r.Key, PayloadType: r.PayloadType, Payload: r.Payload,
		EnqueuedAt: r.CreatedAt, FailedAt: r.FailedAt, LastError: r.LastError, Attempts: r.Attempts,
		Status: deadletter.Status(r.Status), Note: r.Note, CompletedAt: r.CompletedAt, ReplayID: r.ReplayID}
	if p, ok := parts[r.PartitionID]; ok {
		l.Queue, l.Partition = p.Queue, p.Partition
	}
	if len(r.Headers) > 0 {
		_ = json.Unmarshal(r.Headers, &l.Headers) // written by seqbox from a map: always an object
	}
	return l
}

// replayHeaders is the original's headers plus deadletter.ReplayOfHeader.
func replayHeaders(original []byte, id dialect.MessageID) ([]byte, error) {
	h := map[string]string{}
	if len(original) > 0 {
		if err := json.Unmarshal(original, &h); err != nil {
			return nil, fmt.Errorf("headers are not a JSON object: %w", err)
		}
	}
	h[deadletter.ReplayOfHeader] = id.String()
	return json.Marshal(h)
}
