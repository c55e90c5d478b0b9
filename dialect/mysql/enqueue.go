package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// insertSQL writes a chunk of messages as two multi-row INSERTs, bodies
// first, into the current generation's table (?body; rotate.go), then
// incoming rows in the caller's order (their AUTO_INCREMENT ids are the
// FIFO order), with the generation of their bodies.
var insertSQL = kit.InsertSQL{
	Bodies: kit.Inline(`INSERT INTO ?body (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows`,
		kit.Rows(`(?id, ?key, ?payload_type, ?payload, ?headers, UTC_TIMESTAMP(6))`)),
	Incoming: kit.Inline(`INSERT INTO {incoming} (partition_id, body_id, body_gen) VALUES ?rows`, kit.Rows(`(?pid, ?id, ?gen)`)),
	PerGen:   true,
}

// enqueueStmts are the enqueue's statements of this dialect's own.
type enqueueStmts struct {
	// PendingList reads which of the messages ?ids are committed and not
	// yet acked: no outgoing row yet (still incoming), or one past its
	// partition's cursor. A message's body and outgoing row share a
	// generation: one arm per generation.
	PendingList *kit.Stmt
}

var enqueueSQL = enqueueStmts{
	PendingList: kit.Inline(`SELECT b.id FROM {body_g0} b LEFT JOIN {outgoing_g0} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g1} b LEFT JOIN {outgoing_g1} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g2} b LEFT JOIN {outgoing_g2} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)`),
}

// MessageInsertMany writes each chunk as two multi-row INSERTs.
func (d *mysqlDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return kit.InsertChunks(ctx, p, insertSQL.InsertGen(d.Runner, d.gens.Current(d.Runner, rotateSQL.Current)))
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *mysqlDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, enqueueSQL.PendingList, p)
}
