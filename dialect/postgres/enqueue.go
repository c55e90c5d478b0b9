package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// inserts writes a chunk of messages. Every value is one array per
// column (enqueueArrays), so that each statement's text is the same for
// any number of rows: prepared once, never parsed or planned again. A
// VALUES list of 100 rows cost the server about as much to parse and plan
// as to insert (BENCHMARKS.md, "Figures behind design choices", "PostgreSQL
// enqueue prepared"). unnest yields the rows in the caller's order, so
// incoming ids (the FIFO order) follow it. ?gen is the generation the
// process caches (rotate.go): the body goes to that partition of body, and
// incoming records it for the move, which writes the outgoing row to the
// same one. A caller's transaction of another sql.DB than seqbox's runs
// them inlined (kit.Runner.prepared).
type inserts struct {
	// Bodies and Incoming are the chunk as two statements, bodies first.
	Bodies   *kit.Stmt
	Incoming *kit.Stmt
	// Both writes the bodies and the incoming rows in one round trip: a
	// data-modifying CTE always runs, referenced or not.
	Both *kit.Stmt
}

// bodiesInsert and incomingInsert are a chunk's two INSERTs; inserts.Both
// is the one as a data-modifying CTE before the other.
const (
	bodiesInsert = `INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at, gen)
SELECT u.id, u.msg_key, u.payload_type, u.payload, u.headers, now(), CAST(?gen AS smallint)
FROM unnest(CAST(?ids AS bytea[]), CAST(?keys AS bytea[]), CAST(?types AS text[]), CAST(?payloads AS bytea[]), CAST(?headers AS text[]))
	AS u(id, msg_key, payload_type, payload, headers)`
	incomingInsert = `INSERT INTO {incoming} (partition_id, body_id, body_gen)
SELECT u.pid, u.id, CAST(?gen AS smallint) FROM unnest(CAST(?pids AS bigint[]), CAST(?ids AS bytea[])) AS u(pid, id)`
)

var insertSQL = inserts{
	Bodies:   kit.Prepare(bodiesInsert),
	Incoming: kit.Prepare(incomingInsert),
	Both:     kit.Prepare("WITH b AS (" + bodiesInsert + ")\n" + incomingInsert),
}

// enqueueArrays is a chunk's values as the statements of inserts take
// them: one array per column, and the generation.
func enqueueArrays(rows []dialect.MessageRow, gen int16) kit.Args {
	ids, keys, types, payloads, headers := make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows))
	pids := make([]int64, len(rows))
	for i := range rows {
		r := &rows[i]
		ids[i], types[i], payloads[i], headers[i], pids[i] = r.ID[:], []byte(r.PayloadType), r.Payload, r.Headers, r.PartitionID
		if r.Key != "" {
			keys[i] = []byte(r.Key)
		}
	}
	return kit.Args{"ids": kit.PGByteaArray(ids), "keys": kit.PGByteaArray(keys), "types": kit.PGTextArray(types),
		"payloads": kit.PGByteaArray(payloads), "headers": kit.PGTextArray(headers), "pids": kit.PGArray(pids), "gen": gen}
}

// cteInsertMaxRows is the largest chunk written as one statement
// (inserts.Both). The CTE wins at small chunks, where the round trip it
// saves is what costs, and loses at large ones, where the two plain
// INSERTs cost the server less per row (BENCHMARKS.md, "Figures behind
// design choices", "PostgreSQL insert shape").
const cteInsertMaxRows = 49

// MessageInsertMany writes each chunk: small ones in one statement, larger
// ones as two. Every row goes to the generation the process caches, read
// once per call so that a body and its incoming row always agree; a stale
// one is safe (rotate.go).
func (d *pgDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	gen := d.gens.Current(d.Runner, rotateSQL.Current)
	return kit.InsertChunks(ctx, p, func(ctx context.Context, conn bun.IConn, rows []dialect.MessageRow) error {
		args := enqueueArrays(rows, gen)
		if len(rows) <= cteInsertMaxRows {
			_, err := d.Exec(ctx, conn, insertSQL.Both, args)
			return err
		}
		bodies := kit.Args{"ids": args["ids"], "keys": args["keys"], "types": args["types"], "payloads": args["payloads"], "headers": args["headers"], "gen": gen}
		if _, err := d.Exec(ctx, conn, insertSQL.Bodies, bodies); err != nil {
			return err
		}
		_, err := d.Exec(ctx, conn, insertSQL.Incoming, kit.Args{"pids": args["pids"], "ids": args["ids"], "gen": gen})
		return err
	})
}

// pending reads which messages are committed and not yet acked.
type pending struct {
	// List reads the ids among ?ids that have no outgoing row yet (still
	// incoming) or one past their partition's cursor.
	List *kit.Stmt
}

var pendingSQL = pending{
	List: kit.Inline(`SELECT b.id FROM {body} b
LEFT JOIN {outgoing} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)`),
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *pgDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, pendingSQL.List, p)
}
