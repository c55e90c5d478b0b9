package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// insertSQL writes a chunk of messages as two multi-row INSERTs: the
// bodies, then the incoming rows in the same order, so that incoming ids
// (the FIFO order) follow the caller's order.
var insertSQL = kit.InsertSQL{
	Bodies: kit.Inline(`INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows`,
		kit.Rows(`(?id, ?key, ?payload_type, ?payload, ?headers, strftime('%Y-%m-%d %H:%M:%f', 'now'))`)),
	Incoming: kit.Inline(`INSERT INTO {incoming} (partition_id, body_id) VALUES ?rows`,
		kit.Rows(`(?pid, ?id)`)),
}

// enqueueStmts are the enqueue's own reads.
type enqueueStmts struct {
	// Pending reads which of the bodies ?ids are not acked yet: not
	// sequenced (no outgoing row), or sequenced past the cursor.
	Pending *kit.Stmt
}

var enqueueSQL = enqueueStmts{
	Pending: kit.Inline(`SELECT b.id FROM {body} b
LEFT JOIN {outgoing} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)`),
}

// MessageInsertMany writes each chunk as two multi-row INSERTs.
func (d *sqliteDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return kit.InsertChunks(ctx, p, insertSQL.Insert(d.Runner))
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *sqliteDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, enqueueSQL.Pending, p)
}
