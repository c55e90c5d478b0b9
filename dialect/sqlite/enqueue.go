package sqlite

import (
	"context"
	"strconv"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// insertSQL writes a chunk of messages as two multi-row INSERTs: the
// bodies, into the current generation's table (one statement per
// generation; rotate.go), then the incoming rows in the same order, so
// that incoming ids (the FIFO order) follow the caller's order, with the
// generation of their bodies. Both are prepared, written in pieces of a
// few fixed sizes (kit.PrepareRows): SQLite parsed an inlined 100-row
// INSERT in about as long as it took to run it.
var insertSQL = kit.InsertSQL{
	Bodies: kit.PerGeneration(func(g int) *kit.Stmt {
		return kit.PrepareRows(`INSERT INTO {body_g`+strconv.Itoa(g)+`} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows`,
			kit.Rows(`(?id, ?key, ?payload_type, ?payload, ?headers, strftime('%Y-%m-%d %H:%M:%f', 'now'))`))
	}),
	Incoming: kit.PrepareRows(`INSERT INTO {incoming} (partition_id, body_id, body_gen) VALUES ?rows`,
		kit.Rows(`(?pid, ?id, ?gen)`)),
}

// enqueueStmts are the enqueue's own reads.
type enqueueStmts struct {
	// Pending reads which of the bodies ?ids are not acked yet: not
	// sequenced (no outgoing row), or sequenced past the cursor. A
	// message's body and outgoing row share a generation: one arm per
	// generation.
	Pending *kit.Stmt
}

var enqueueSQL = enqueueStmts{
	Pending: kit.Inline(`SELECT b.id FROM {body_g0} b
LEFT JOIN {outgoing_g0} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g1} b
LEFT JOIN {outgoing_g1} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g2} b
LEFT JOIN {outgoing_g2} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)`),
}

// MessageInsertMany writes each chunk as two multi-row INSERTs, into the
// generation this process caches (read once per call, so that a body and
// its incoming row always agree; a stale one is safe: rotate.go).
func (d *sqliteDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return kit.InsertChunks(ctx, p, insertSQL.InsertGen(d.Runner, d.gens.Current(d.Runner, rotateSQL.Current)))
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *sqliteDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, enqueueSQL.Pending, p)
}
