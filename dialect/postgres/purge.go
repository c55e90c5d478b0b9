package postgres

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// purgeSQL is a partition's purge (docs/ARCHITECTURE.md, "Purge"). The
// header filter ?headers is one JSON object of every header that must
// match (a purge names at least one): a body matches when its headers, a
// JSON object as text, contain it (jsonb @>). Bodies are probed by primary
// key from the row (see OutgoingList in processor.go). The locks wait.
var purgeSQL = kit.PurgeSQL{
	LockPartition: kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid FOR NO KEY UPDATE`),
	// lease_window: how far past the cursor a live lease's batch may reach.
	LockProcessor: kit.Inline(`SELECT processed_seq,
	CASE WHEN locked_until IS NOT NULL AND locked_until > now()
		THEN COALESCE(lease_limit, CAST(?largest_batch AS BIGINT)) ELSE 0 END AS lease_window
FROM {processor} WHERE ` + currentParam + ` FOR NO KEY UPDATE`),
	// incoming has no index of id alone (migration 013): both statements
	// read the partition's rows from its bound by (partition_id, xid, id).
	Incoming: kit.Inline(`SELECT i.id, i.body_id FROM {incoming} i
CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = i.body_id AND gen = i.body_gen LIMIT 1) b
WHERE i.partition_id = ?pid AND i.xid >= ` + paramBound + `
	AND b.headers::jsonb @> CAST(?headers AS jsonb)
ORDER BY i.xid, i.id LIMIT ?limit`),
	// Counts: one statement, so one snapshot: a message the sequencer
	// moves meanwhile is counted in one stage, not both.
	Counts: kit.Inline(`SELECT p.id AS partition_id,
	(SELECT COUNT(*) FROM {incoming} i CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = i.body_id AND gen = i.body_gen LIMIT 1) b
		WHERE i.partition_id = p.id AND b.headers::jsonb @> CAST(?headers AS jsonb)) AS incoming,
	(SELECT COUNT(*) FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND b.headers::jsonb @> CAST(?headers AS jsonb)) AS in_flight,
	(SELECT COUNT(*) FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND b.headers::jsonb @> CAST(?headers AS jsonb)) AS outgoing
FROM (SELECT pa.id, pr.processed_seq, CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until > now()
		THEN COALESCE(pr.lease_limit, CAST(?largest_batch AS BIGINT)) ELSE 0 END AS lease_window
	FROM {partitions} pa CROSS JOIN ` + currentRow("pa.id", "pr") + ` WHERE pa.queue = ?queue) p
ORDER BY p.id`),
	Outgoing: kit.Inline(`SELECT o.seq, o.body_id FROM {outgoing} o
CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND b.headers::jsonb @> CAST(?headers AS jsonb)
ORDER BY o.seq LIMIT ?limit`),
	CountOutgoing: kit.Inline(`SELECT COUNT(*) FROM {outgoing} o
CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0
	AND b.headers::jsonb @> CAST(?headers AS jsonb)`),
	DeleteIncoming: kit.Inline(`DELETE FROM {incoming}
WHERE partition_id = ?pid AND xid >= ` + paramBound + ` AND id IN (?ids)`),
	DeleteBodies: kit.Inline(`DELETE FROM {body} WHERE id IN (?ids)`),
	Tombstone:    kit.Inline(`UPDATE {outgoing} SET purged = 1 WHERE partition_id = ?pid AND seq IN (?seqs)`),
	// A tombstone keeps its body row (the id, for WaitProcessed and the
	// vacuum's join) but not its data.
	BlankBodies: kit.Inline(`UPDATE {body} SET payload = ?payload, headers = NULL, msg_key = NULL WHERE id IN (?ids)`),
	// Counts the purges that made tombstones: a lease statement that read
	// its batch from an older snapshot sees it changed (see fresh).
	CountPurge: kit.Inline(`UPDATE {processor} SET purges = purges + 1, version = version + 1 WHERE ` + currentParam),
}

// PurgePartition purges up to p.Limit messages of each stage in one
// transaction; see dialect.Dialect.
func (d *pgDialect) PurgePartition(ctx context.Context, p *dialect.PurgeParams) (dialect.PurgeResult, error) {
	return purgeSQL.Partition(ctx, d.Runner, p)
}

// PurgePreview counts what a purge would take from each partition of a
// queue, in one statement; see dialect.Dialect.
func (d *pgDialect) PurgePreview(ctx context.Context, p *dialect.PurgePreviewParams) (map[int64]dialect.PurgeResult, error) {
	return purgeSQL.Preview(ctx, d.Runner, p)
}
