package sqlcore

import (
	"context"
	"math"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// deadLetterWhere renders a filter as conditions joined by AND. Only the
// fixed texts below are SQL; every value goes through bun's placeholders.
type deadLetterWhere struct {
	f    *dialect.DeadLetterFilter
	time string // the time_value fragment: "?" or a conversion around it
}

func (w deadLetterWhere) AppendQuery(gen schema.QueryGen, b []byte) ([]byte, error) {
	f := w.f
	b = append(b, "1 = 1"...)
	and := func(cond string, args ...any) {
		b = append(b, " AND "...)
		b = gen.AppendQuery(b, cond, args...)
	}
	none := func() { b = append(b, " AND 1 = 0"...) }
	switch {
	case f.IDs == nil:
	case len(f.IDs) == 0:
		none()
	default:
		and("id IN (?)", bun.List(f.IDs))
	}
	switch {
	case f.PartitionIDs == nil:
	case len(f.PartitionIDs) == 0:
		none()
	default:
		and("partition_id IN (?)", bun.List(f.PartitionIDs))
	}
	if len(f.Statuses) > 0 {
		and("status IN (?)", bun.List(f.Statuses))
	}
	if f.PayloadType != "" {
		and("payload_type = ?", f.PayloadType)
	}
	if f.MessageID != nil {
		and("message_id = ?", f.MessageID[:])
	}
	if !f.FailedFrom.IsZero() {
		and("failed_at >= "+w.time, f.FailedFrom.UTC())
	}
	if !f.FailedTo.IsZero() {
		and("failed_at < "+w.time, f.FailedTo.UTC())
	}
	if !f.CompletedTo.IsZero() {
		and("completed_at < "+w.time, f.CompletedTo.UTC())
	}
	return b, nil
}

func (c *Core) where(f *dialect.DeadLetterFilter) deadLetterWhere {
	return deadLetterWhere{f: f, time: c.SQL("{time_value}")}
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

// DeadLetterList lists the letters a filter matches, in id order, on
// p.Conn (locking them there with p.Lock).
func (c *Core) DeadLetterList(ctx context.Context, p *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error) {
	conn := p.Conn
	if conn == nil {
		conn = c.db
	}
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	stmt := map[[2]bool]string{
		{false, false}: stmtDeadLetterList, {false, true}: stmtDeadLetterListLock,
		{true, false}: stmtDeadLetterIDs, {true, true}: stmtDeadLetterIDsLock,
	}[[2]bool{p.IDsOnly, p.Lock}]
	var rows []deadLetterRow
	if err := c.Raw(conn, c.SQL(stmt), c.where(&p.Filter), p.AfterID, limit).Scan(ctx, &rows); err != nil {
		return nil, c.Wrap(err)
	}
	out := make([]dialect.DeadLetterRecord, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}

// DeadLetterTally counts the letters a filter matches, by status.
func (c *Core) DeadLetterTally(ctx context.Context, p *dialect.DeadLetterTallyParams) (map[string]int64, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int64  `bun:"n"`
	}
	if err := c.scan(ctx, &rows, c.SQL(stmtDeadLetterTally), c.where(&p.Filter)); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// deadLetterChunk bounds the ids of one statement.
const deadLetterChunk = 500

// DeadLetterUpdate moves letters still in p.From to p.To on p.Conn and
// returns how many moved.
func (c *Core) DeadLetterUpdate(ctx context.Context, p *dialect.DeadLetterUpdateParams) (int, error) {
	final := p.To == dialect.DeadLetterResolved || p.To == dialect.DeadLetterDiscarded
	var note any
	if p.Note != "" {
		note = dialect.ErrorText(p.Note) // storable on every database, as error text is
	}
	return c.execChunks(ctx, len(p.IDs), func(lo, hi int) *bun.RawQuery {
		ids := p.IDs[lo:hi]
		if p.ReplayIDs != nil {
			cases := ValuesJoin(len(ids), " ", func(gen schema.QueryGen, b []byte, i int) []byte {
				return gen.AppendQuery(b, "WHEN ? THEN ?", ids[i], p.ReplayIDs[lo+i][:])
			})
			return c.Raw(p.Conn, c.SQL(stmtDeadLetterSetReplayed), p.To, cases, bun.List(ids), p.From)
		}
		return c.Raw(p.Conn, c.SQL(stmtDeadLetterSetStatus), p.To, note, final, bun.List(ids), p.From)
	})
}

// DeadLetterDelete deletes letters by id on p.Conn.
func (c *Core) DeadLetterDelete(ctx context.Context, p *dialect.DeadLetterDeleteParams) (int, error) {
	return c.execChunks(ctx, len(p.IDs), func(lo, hi int) *bun.RawQuery {
		return c.Raw(p.Conn, c.SQL(stmtDeadLetterDelete), bun.List(p.IDs[lo:hi]))
	})
}

// execChunks runs the statement of each chunk of n ids and sums the rows
// they changed.
func (c *Core) execChunks(ctx context.Context, n int, chunk func(lo, hi int) *bun.RawQuery) (int, error) {
	total := 0
	for lo := 0; lo < n; lo += deadLetterChunk {
		res, err := chunk(lo, min(lo+deadLetterChunk, n)).Exec(ctx)
		if err != nil {
			return total, c.Wrap(err)
		}
		changed, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(changed)
	}
	return total, nil
}

// resolveReplays marks the letters whose replays were just acked resolved,
// on conn (the ack's transaction).
func (c *Core) resolveReplays(ctx context.Context, conn bun.IConn, ids []dialect.MessageID) error {
	raw := make([][]byte, len(ids))
	for i := range ids {
		raw[i] = ids[i][:]
	}
	_, err := c.Raw(conn, c.SQL(stmtDeadLetterResolve), dialect.DeadLetterResolved, dialect.DeadLetterReplayed, bun.List(raw)).Exec(ctx)
	return c.Wrap(err)
}

// PartitionList names the partitions of one queue, or of all.
func (c *Core) PartitionList(ctx context.Context, p *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	var rows []struct {
		ID          int64  `bun:"id"`
		Queue       string `bun:"queue"`
		PartitionNo int    `bun:"partition_no"`
	}
	var err error
	if p.Queue == "" {
		err = c.scan(ctx, &rows, c.SQL(stmtPartitionList))
	} else {
		err = c.scan(ctx, &rows, c.SQL(stmtPartitionListQueue), p.Queue)
	}
	if err != nil {
		return nil, err
	}
	out := make([]dialect.PartitionInfo, len(rows))
	for i, r := range rows {
		out[i] = dialect.PartitionInfo{ID: r.ID, Queue: r.Queue, Partition: r.PartitionNo}
	}
	return out, nil
}
