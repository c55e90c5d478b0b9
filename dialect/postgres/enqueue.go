package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// insertSQL writes a chunk as two multi-row statements: the bodies, then
// the incoming rows in the same order, so that incoming ids (the FIFO
// order) follow the caller's. ?gen is the generation the process caches
// (rotate.go): the body goes to that partition of body, and incoming
// records it for the move, which writes the outgoing row to the same one.
var insertSQL = kit.InsertSQL{
	Bodies: kit.Inline(`INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at, gen) VALUES ?rows`,
		kit.Rows(`(?id, ?key, ?payload_type, ?payload, ?headers, now(), ?gen)`)),
	Incoming: kit.Inline(`INSERT INTO {incoming} (partition_id, body_id, body_gen) VALUES ?rows`,
		kit.Rows(`(?pid, ?id, ?gen)`)),
}

// insertOne is the chunk written in one statement.
type insertOne struct {
	// Insert writes the bodies and the incoming rows in one round trip: a
	// data-modifying CTE always runs, referenced or not. ?bodies and
	// ?incoming are insertSQL's rows (kit.BodyRows, kit.IncomingRows).
	Insert *kit.Stmt
}

var insertOneSQL = insertOne{
	Insert: kit.Inline(`WITH b AS (INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at, gen) VALUES ?bodies)
INSERT INTO {incoming} (partition_id, body_id, body_gen) VALUES ?incoming`,
		kit.List{Name: "bodies", Item: `(?id, ?key, ?payload_type, ?payload, ?headers, now(), ?gen)`, Sep: ", "},
		kit.List{Name: "incoming", Item: `(?pid, ?id, ?gen)`, Sep: ", "}),
}

// cteInsertMaxRows is the largest chunk written as one statement
// (insertOneSQL). The CTE wins at small chunks, where the round trip it
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
	two := insertSQL.InsertGen(d.Runner, gen)
	return kit.InsertChunks(ctx, p, func(ctx context.Context, conn bun.IConn, rows []dialect.MessageRow) error {
		if len(rows) > cteInsertMaxRows {
			return two(ctx, conn, rows)
		}
		_, err := d.Exec(ctx, conn, insertOneSQL.Insert, kit.Args{"bodies": kit.BodyRowsGen(rows, gen), "incoming": kit.IncomingRowsGen(rows, gen)})
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
