package kit

import (
	"context"
	"math"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// DeadLetterSQL is the statements of the dead-letter actions. The filter
// is one fixed condition in each statement that takes it, every part
// switched off by its own value (FilterArgs): the statement's text is the
// same whatever the filter.
type DeadLetterSQL struct {
	// List reads the letters the filter matches after id ?after, up to
	// ?limit, in id order; ListLock also row-locks them, waiting.
	List     *Stmt
	ListLock *Stmt
	// IDs and IDsLock are List and ListLock reading id and status only.
	IDs     *Stmt
	IDsLock *Stmt
	// Tally counts the letters the filter matches by status: status, n, and the highest id: max_id.
	Tally *Stmt
	// SetStatus moves the letters ?ids (a list) still in status ?from to
	// ?to, with ?note when not NULL, completed now when ?final = 1.
	SetStatus *Stmt
	// SetReplayed moves the letters ?ids still in ?from to ?to, each with
	// its replay's message id: ?cases (WHEN ?id THEN ?replay_id).
	SetReplayed *Stmt
	// Delete deletes the letters ?ids.
	Delete *Stmt
}

// FilterArgs are a filter's values: ?none = 1 matches nothing; ?any_id,
// ?any_partition and ?any_status = 1 switch off the list after them
// (?ids, ?pids, ?statuses, never empty); ?payload_type ” and NULL
// ?message_id, ?failed_from, ?failed_to, ?completed_to switch off theirs,
// as do ?error_text ”, NULL ?headers and ?max_id 0.
func FilterArgs(f *dialect.DeadLetterFilter) Args {
	none := (f.IDs != nil && len(f.IDs) == 0) || (f.PartitionIDs != nil && len(f.PartitionIDs) == 0)
	a := Args{"none": Bool(none), "any_id": Bool(len(f.IDs) == 0), "ids": IDs([]int64{0}),
		"any_partition": Bool(len(f.PartitionIDs) == 0), "pids": IDs([]int64{0}),
		"any_status": Bool(len(f.Statuses) == 0), "statuses": bun.List([]string{""}),
		"payload_type": f.PayloadType, "message_id": nil,
		"failed_from": timeArg(f.FailedFrom), "failed_to": timeArg(f.FailedTo), "completed_to": timeArg(f.CompletedTo),
		"error_text": f.ErrorText, "headers": nil, "max_id": f.MaxID}
	if f.Headers != nil {
		a["headers"] = string(f.Headers)
	}
	if len(f.IDs) > 0 {
		a["ids"] = IDs(f.IDs)
	}
	if len(f.PartitionIDs) > 0 {
		a["pids"] = IDs(f.PartitionIDs)
	}
	if len(f.Statuses) > 0 {
		a["statuses"] = bun.List(f.Statuses)
	}
	if f.MessageID != nil {
		a["message_id"] = f.MessageID[:]
	}
	return a
}

// timeArg is a filter's time in UTC, or NULL for none.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

type deadLetterRow struct {
	ID          int64      `bun:"id"`
	PartitionID int64      `bun:"partition_id"`
	Seq         int64      `bun:"seq"`
	MessageID   []byte     `bun:"message_id"`
	Key         []byte     `bun:"msg_key"`
	PayloadType string     `bun:"payload_type"`
	Payload     []byte     `bun:"payload"`
	Headers     *string    `bun:"headers"`
	CreatedAt   time.Time  `bun:"created_at"`
	FailedAt    time.Time  `bun:"failed_at"`
	LastError   *string    `bun:"last_error"`
	Attempts    int        `bun:"attempts"`
	Status      string     `bun:"status"`
	Note        *string    `bun:"note"`
	CompletedAt *time.Time `bun:"completed_at"`
	ReplayID    []byte     `bun:"replay_id"`
}

func (r *deadLetterRow) record() dialect.DeadLetterRecord {
	out := dialect.DeadLetterRecord{ID: r.ID, PartitionID: r.PartitionID, Seq: r.Seq, MessageID: toID(r.MessageID),
		Key: string(r.Key), PayloadType: r.PayloadType, Payload: r.Payload, CreatedAt: r.CreatedAt.UTC(), FailedAt: r.FailedAt.UTC(),
		Attempts: r.Attempts, Status: r.Status}
	if r.Headers != nil {
		out.Headers = []byte(*r.Headers)
	}
	if r.LastError != nil {
		out.LastError = *r.LastError
	}
	if r.Note != nil {
		out.Note = *r.Note
	}
	if r.CompletedAt != nil {
		t := r.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if len(r.ReplayID) > 0 {
		id := toID(r.ReplayID)
		out.ReplayID = &id
	}
	return out
}

// Read lists the letters a filter matches, in id order, on p.Conn (the
// database when nil), locking them there with p.Lock.
func (s *DeadLetterSQL) Read(ctx context.Context, r *Runner, p *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error) {
	conn := p.Conn
	if conn == nil {
		conn = r.DB()
	}
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	stmt := map[[2]bool]*Stmt{
		{false, false}: s.List, {false, true}: s.ListLock,
		{true, false}: s.IDs, {true, true}: s.IDsLock,
	}[[2]bool{p.IDsOnly, p.Lock}]
	args := FilterArgs(&p.Filter)
	args["after"], args["limit"] = p.AfterID, limit
	var rows []deadLetterRow
	if err := r.Query(ctx, conn, stmt, args, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.DeadLetterRecord, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}

// Count counts the letters a filter matches, by status.
func (s *DeadLetterSQL) Count(ctx context.Context, r *Runner, p *dialect.DeadLetterTallyParams) (dialect.DeadLetterTally, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int64  `bun:"n"`
		MaxID  int64  `bun:"max_id"`
	}
	if err := r.Query(ctx, r.DB(), s.Tally, FilterArgs(&p.Filter), &rows); err != nil {
		return dialect.DeadLetterTally{}, err
	}
	out := dialect.DeadLetterTally{ByStatus: make(map[string]int64, len(rows))}
	for _, row := range rows {
		out.ByStatus[row.Status] = row.N
		out.MaxID = max(out.MaxID, row.MaxID)
	}
	return out, nil
}

// deadLetterChunk bounds the ids of one statement.
const deadLetterChunk = 500

// Move moves letters still in p.From to p.To on p.Conn and returns how
// many moved.
func (s *DeadLetterSQL) Move(ctx context.Context, r *Runner, p *dialect.DeadLetterUpdateParams) (int, error) {
	final := p.To == dialect.DeadLetterResolved || p.To == dialect.DeadLetterDiscarded
	var note any
	if p.Note != "" {
		note = dialect.ErrorText(p.Note) // storable on every database, as error text is
	}
	return chunks(ctx, r, len(p.IDs), func(lo, hi int) (int64, error) {
		ids := p.IDs[lo:hi]
		if p.ReplayIDs != nil {
			cases := make([]Args, len(ids))
			for i, id := range ids {
				cases[i] = Args{"id": id, "replay_id": p.ReplayIDs[lo+i][:]}
			}
			return r.Affected(ctx, p.Conn, s.SetReplayed, Args{"to": p.To, "cases": cases, "ids": IDs(ids), "from": p.From})
		}
		return r.Affected(ctx, p.Conn, s.SetStatus, Args{"to": p.To, "note": note, "final": Bool(final), "ids": IDs(ids), "from": p.From})
	})
}

// Remove deletes letters by id on p.Conn.
func (s *DeadLetterSQL) Remove(ctx context.Context, r *Runner, p *dialect.DeadLetterDeleteParams) (int, error) {
	return chunks(ctx, r, len(p.IDs), func(lo, hi int) (int64, error) {
		return r.Affected(ctx, p.Conn, s.Delete, Args{"ids": IDs(p.IDs[lo:hi])})
	})
}

// chunks runs one statement per chunk of n ids and sums the rows they changed.
func chunks(ctx context.Context, r *Runner, n int, chunk func(lo, hi int) (int64, error)) (int, error) {
	total := 0
	for lo := 0; lo < n; lo += deadLetterChunk {
		changed, err := chunk(lo, min(lo+deadLetterChunk, n))
		if err != nil {
			return total, err
		}
		total += int(changed)
	}
	return total, nil
}
