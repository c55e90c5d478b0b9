package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// inserts writes a chunk of messages. Every value is bound (enqueueArgs),
// so that each statement's text is the same for any number of rows:
// prepared once, never parsed or planned again. A VALUES list of 100 rows
// cost the server about as much to parse and plan as to insert
// (BENCHMARKS.md, "Figures behind design choices", "PostgreSQL enqueue
// prepared"). The byte columns are packed (kit.PGPack): the ids end to end
// in one bytea, the keys, payloads and headers each in one bytea with
// their spans; a bytea[] of the payloads cost more to bind than the
// insert itself (BENCHMARKS.md, "PostgreSQL's byte values packed"). unnest
// yields the rows in the caller's order, so incoming ids (the FIFO order)
// follow it. ?gen is the generation the process caches (rotate.go): the
// body goes to that partition of body, and incoming records it for the
// move, which writes the outgoing row to the same one. A caller's
// transaction of another sql.DB than seqbox's runs them inlined
// (kit.Runner.prepared).
type inserts struct {
	// Bodies and Incoming are the chunk as two statements, bodies first.
	Bodies   *kit.Stmt
	Incoming *kit.Stmt
	// Both writes the bodies and the incoming rows in one round trip: a
	// data-modifying CTE always runs, referenced or not.
	Both *kit.Stmt
}

// bodiesInsert and incomingInsert are a chunk's two INSERTs; inserts.Both
// is the one as a data-modifying CTE before the other. Headers are JSON
// text, packed as its UTF-8 bytes.
var (
	bodiesInsert = `INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at, gen, partition_id)
SELECT ` + kit.PGFixed("?ids", "u.n", len(dialect.MessageID{})) + `, ` + kit.PGUnpack("?keys", "u.key") + `, u.payload_type,
	` + kit.PGUnpack("?payloads", "u.payload") + `, convert_from(` + kit.PGUnpack("?headers", "u.headers") + `, 'UTF8'),
	now(), CAST(?gen AS smallint), u.pid
FROM unnest(CAST(?pids AS bigint[]), CAST(?types AS text[]), CAST(?key_spans AS bigint[]), CAST(?payload_spans AS bigint[]), CAST(?header_spans AS bigint[]))
	WITH ORDINALITY AS u(pid, payload_type, key, payload, headers, n)`
	incomingInsert = `INSERT INTO {incoming} (partition_id, body_id, body_gen)
SELECT u.pid, ` + kit.PGFixed("?ids", "u.n", len(dialect.MessageID{})) + `, CAST(?gen AS smallint)
FROM unnest(CAST(?pids AS bigint[])) WITH ORDINALITY AS u(pid, n)`
)

var insertSQL = inserts{
	Bodies:   kit.Prepare(bodiesInsert),
	Incoming: kit.Prepare(incomingInsert),
	Both:     kit.Prepare("WITH b AS (" + bodiesInsert + ")\n" + incomingInsert),
}

// enqueueArgs is a chunk's values as the statements of inserts take them,
// and the generation.
func enqueueArgs(rows []dialect.MessageRow, gen int16) kit.Args {
	keys, types, payloads, headers := make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows))
	ids := make([]byte, 0, len(rows)*len(dialect.MessageID{}))
	pids := make([]int64, len(rows))
	for i := range rows {
		r := &rows[i]
		ids = append(ids, r.ID[:]...)
		types[i], payloads[i], headers[i], pids[i] = []byte(r.PayloadType), r.Payload, r.Headers, r.PartitionID
		if r.Key != "" {
			keys[i] = []byte(r.Key)
		}
	}
	k, p, h := kit.PGPack(keys), kit.PGPack(payloads), kit.PGPack(headers)
	return kit.Args{"ids": ids, "keys": k.Blob, "key_spans": k.Spans, "types": kit.PGTextArray(types),
		"payloads": p.Blob, "payload_spans": p.Spans, "headers": h.Blob, "header_spans": h.Spans,
		"pids": kit.PGArray(pids), "gen": gen}
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
		args := enqueueArgs(rows, gen)
		if len(rows) <= cteInsertMaxRows {
			_, err := d.Exec(ctx, conn, insertSQL.Both, args)
			return err
		}
		if _, err := d.Exec(ctx, conn, insertSQL.Bodies, args); err != nil {
			return err
		}
		_, err := d.Exec(ctx, conn, insertSQL.Incoming, kit.Args{"pids": args["pids"], "ids": args["ids"], "gen": gen})
		return err
	})
}

// pending reads which messages are committed and not yet acked.
type pending struct {
	// List reads the ids among ?ids whose body is there and whose message
	// is in its partition's backlog: an incoming row from the partition's
	// bound on (the move's index), or an outgoing row above the cursor
	// (the primary key). One snapshot sees a message in exactly one of the
	// two: the move deletes the incoming row in the transaction that
	// inserts the outgoing one. Outgoing has no index by body id: it cost
	// the move as much as the rest of its INSERT (BENCHMARKS.md, "Figures
	// behind design choices", "No index of outgoing by body"). So the
	// backlog of each partition asked about is read once and joined with
	// the ids: a poll costs what those backlogs hold, whatever the number
	// of ids. Each backlog is read from its own subquery (OFFSET 0 keeps
	// the planner from flattening it into a join it could reorder on
	// stale statistics), by the move's index and the primary key. A body
	// written before migration 012 has no partition; it is pending unless
	// an outgoing row of it is at or below its cursor, looked for in its
	// generation without an index.
	List *kit.Stmt
}

var pendingSQL = pending{
	List: kit.Inline(`WITH b AS MATERIALIZED (SELECT id, gen, partition_id FROM {body} WHERE id IN (?ids)),
s AS MATERIALIZED (SELECT DISTINCT partition_id FROM b WHERE partition_id IS NOT NULL)
SELECT b.id FROM b WHERE b.partition_id IS NULL AND NOT EXISTS (SELECT 1 FROM {outgoing} o CROSS JOIN ` + currentRow("o.partition_id", "p") + `
	WHERE o.gen = b.gen AND o.body_id = b.id AND o.seq <= p.processed_seq)
UNION ALL
SELECT b.id FROM b JOIN (SELECT i.body_id AS id FROM s JOIN {partitions} pa ON pa.id = s.partition_id
		CROSS JOIN LATERAL (SELECT i.body_id FROM {incoming} i WHERE i.partition_id = pa.id AND i.xid >= ` + partitionBound + ` OFFSET 0) i
	UNION ALL
	SELECT o.body_id FROM s CROSS JOIN ` + currentRow("s.partition_id", "p") + `
		CROSS JOIN LATERAL (SELECT o.body_id FROM {outgoing} o WHERE o.partition_id = p.partition_id AND o.seq > p.processed_seq OFFSET 0) o
	) q ON q.id = b.id`),
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *pgDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, pendingSQL.List, p)
}
