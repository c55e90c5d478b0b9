package kit

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// InsertSQL writes a chunk of messages as two multi-row statements, into
// the tables of a generation (MariaDB, SQLite: docs/ROTATION.md).
type InsertSQL struct {
	// Bodies[g] inserts ?rows (?id, ?key, ?payload_type, ?payload,
	// ?headers) into generation g's body table, created now: one
	// statement per table, so that each can be prepared (PrepareRows).
	Bodies [Generations]*Stmt
	// Incoming inserts ?rows (?pid, ?id, ?gen) into incoming.
	Incoming *Stmt
}

// InsertChunk writes one chunk of rows on conn.
type InsertChunk func(ctx context.Context, conn bun.IConn, rows []dialect.MessageRow) error

// InsertChunks splits an enqueue into statements bounded by rows and by
// the size of their SQL text, and writes each with insert. bun inlines
// every value into the text, bytes as hex (doubling them), so the bound
// that matters is the statement's size, not a count of bind parameters.
func InsertChunks(ctx context.Context, p *dialect.MessageInsertManyParams, insert InsertChunk) error {
	rows := p.Rows
	start, size := 0, 0
	for i := range rows {
		// Hex doubles bytes; the rest is the id twice, the type and SQL text.
		rowBytes := 2*(len(rows[i].Payload)+len(rows[i].Headers)) + len(rows[i].PayloadType) + 160
		if i > start && (i-start >= p.ChunkRows || size+rowBytes > p.ChunkBytes) {
			if err := insert(ctx, p.Conn, rows[start:i]); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += rowBytes
	}
	if start == len(rows) {
		return nil
	}
	return insert(ctx, p.Conn, rows[start:])
}

// InsertGen writes the body rows into generation gen, then the incoming
// rows in the same order, so incoming ids (the FIFO order) follow the
// caller's order; they record gen for the move (bodyRowsGen,
// incomingRowsGen).
func (s *InsertSQL) InsertGen(r *Runner, gen int16) InsertChunk {
	return func(ctx context.Context, conn bun.IConn, rows []dialect.MessageRow) error {
		bodies, err := genStmt(s.Bodies, gen)
		if err != nil {
			return err
		}
		if _, err := r.Exec(ctx, conn, bodies, Args{"rows": bodyRowsGen(rows, gen)}); err != nil {
			return err
		}
		_, err = r.Exec(ctx, conn, s.Incoming, Args{"rows": incomingRowsGen(rows, gen)})
		return err
	}
}

// bodyRowsGen are the items of body rows: ?id ?key ?payload_type ?payload
// ?headers, and ?gen, the generation the rows are written to where the
// dialect rotates its tables (docs/ROTATION.md).
func bodyRowsGen(rows []dialect.MessageRow, gen int16) []Item {
	out := make([]Item, len(rows))
	for i := range rows {
		out[i] = bodyRow{&rows[i], gen}
	}
	return out
}

type bodyRow struct {
	m   *dialect.MessageRow
	gen int16
}

func (r bodyRow) Value(name string) (any, bool) {
	switch name {
	case "id":
		return r.m.ID[:], true
	case "key":
		return KeyArg(r.m.Key), true
	case "payload_type":
		return r.m.PayloadType, true
	case "payload":
		return r.m.Payload, true
	case "headers":
		return HeadersArg(r.m.Headers), true
	case "gen":
		return r.gen, true
	}
	return nil, false
}

func (r bodyRow) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	return AppendItem(r, gen, b, name)
}

// incomingRowsGen are the items of incoming rows: ?pid ?id, and ?gen, the
// generation of the rows' bodies (bodyRowsGen).
func incomingRowsGen(rows []dialect.MessageRow, gen int16) []Item {
	out := make([]Item, len(rows))
	for i := range rows {
		out[i] = incomingRow{&rows[i], gen}
	}
	return out
}

type incomingRow struct {
	m   *dialect.MessageRow
	gen int16
}

func (r incomingRow) Value(name string) (any, bool) {
	switch name {
	case "pid":
		return r.m.PartitionID, true
	case "id":
		return r.m.ID[:], true
	case "gen":
		return r.gen, true
	}
	return nil, false
}

func (r incomingRow) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	return AppendItem(r, gen, b, name)
}

// PendingList returns the ids that are committed but not yet acked, with
// stmt (?ids: a list of ids), asking in chunks: one IN list of every id
// could outgrow a statement.
func PendingList(ctx context.Context, r *Runner, stmt *Stmt, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	const chunk = 1000
	var out []dialect.MessageID
	for start := 0; start < len(p.IDs); start += chunk {
		ids := p.IDs[start:min(start+chunk, len(p.IDs))]
		args := make([]any, len(ids))
		for i := range ids {
			args[i] = ids[i][:]
		}
		var found [][]byte
		if err := r.Query(ctx, r.DB(), stmt, Args{"ids": bun.List(args)}, &found); err != nil {
			return nil, err
		}
		for _, f := range found {
			out = append(out, toID(f))
		}
	}
	return out, nil
}

// ReadIDs runs a read of int64s (partition ids, say) on the database.
func ReadIDs(ctx context.Context, r *Runner, stmt *Stmt, args Args) ([]int64, error) {
	var ids []int64
	if err := r.Query(ctx, r.DB(), stmt, args, &ids); err != nil {
		return nil, err
	}
	return ids, nil
}
