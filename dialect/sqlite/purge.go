package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// purgeSQL is a partition's purge (docs/ARCHITECTURE.md, "Purge"). The
// transaction holds the write lock from its start, so the "locking" reads
// are plain reads: nothing else writes the rows meanwhile.
//
// ?headers is one JSON object of the headers that must match; a body
// matches when every pair of it is in the body's headers with the same
// value (headerMatch). Bodies are probed by primary key from each incoming
// or outgoing row: from incoming in the generation i.body_gen names
// (incomingBody), from outgoing in the same generation's table, one arm or
// term per generation.
var purgeSQL = kit.PurgeSQL{
	LockPartition: kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid`),
	// lease_window: how far past the cursor a live lease's batch may reach
	// (a lease from before lease_limit existed: the largest batch).
	LockProcessor: kit.Inline(`SELECT processed_seq, CASE WHEN locked_until IS NOT NULL AND locked_until > strftime('%Y-%m-%d %H:%M:%f', 'now')
THEN COALESCE(lease_limit, CAST(?largest_batch AS INTEGER)) ELSE 0 END AS lease_window
FROM {processor} WHERE partition_id = ?pid`),
	Incoming: kit.Inline(`SELECT i.id, i.body_id FROM {incoming} i
WHERE i.partition_id = ?pid AND ` + headerMatch(incomingBody("headers")) + `
ORDER BY i.id LIMIT ?limit`),
	// Counts: one statement, so one snapshot: a message the sequencer
	// moves meanwhile is counted in one stage, not both.
	Counts: kit.Inline(`SELECT p.id AS partition_id,
	(SELECT COUNT(*) FROM {incoming} i WHERE i.partition_id = p.id AND ` + headerMatch(incomingBody("headers")) + `) AS incoming,
	(SELECT COUNT(*) FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
	+ (SELECT COUNT(*) FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
	+ (SELECT COUNT(*) FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND ` + headerMatch("b.headers") + `) AS in_flight,
	(SELECT COUNT(*) FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
	+ (SELECT COUNT(*) FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
	+ (SELECT COUNT(*) FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND ` + headerMatch("b.headers") + `) AS outgoing
FROM (SELECT pa.id, pr.processed_seq, CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until > strftime('%Y-%m-%d %H:%M:%f', 'now')
		THEN COALESCE(pr.lease_limit, CAST(?largest_batch AS INTEGER)) ELSE 0 END AS lease_window
	FROM {partitions} pa JOIN {processor} pr ON pr.partition_id = pa.id WHERE pa.queue = ?queue) p
ORDER BY p.id`),
	// The ORDER BY of the compound merges the arms in seq order, each read
	// in its primary key's order, up to ?limit (as the batch read).
	Outgoing: kit.Inline(`SELECT o.seq, o.body_id FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND ` + headerMatch("b.headers") + `
UNION ALL SELECT o.seq, o.body_id FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND ` + headerMatch("b.headers") + `
UNION ALL SELECT o.seq, o.body_id FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND ` + headerMatch("b.headers") + `
ORDER BY 1 LIMIT ?limit`),
	CountOutgoing: kit.Inline(`SELECT (SELECT COUNT(*) FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
+ (SELECT COUNT(*) FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND ` + headerMatch("b.headers") + `)
+ (SELECT COUNT(*) FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND ` + headerMatch("b.headers") + `)`),
	DeleteIncoming: kit.Inline(`DELETE FROM {incoming} WHERE partition_id = ?pid AND id IN (?ids)`),
	// One generation's table, ?body or ?outgoing, per run (PerGen).
	DeleteBodies: kit.Inline(`DELETE FROM ?body WHERE id IN (?ids)`),
	Tombstone:    kit.Inline(`UPDATE ?outgoing SET purged = 1 WHERE partition_id = ?pid AND seq IN (?seqs)`),
	// A tombstone keeps its body row (the id, for WaitProcessed and the
	// vacuum's join) but not its data.
	BlankBodies: kit.Inline(`UPDATE ?body SET payload = ?payload, headers = NULL, msg_key = NULL WHERE id IN (?ids)`),
	// Counted on every database so the purge is one flow; only
	// PostgreSQL's leases read it back.
	CountPurge: kit.Inline(`UPDATE {processor} SET purges = purges + 1 WHERE partition_id = ?pid`),
	PerGen:     true,
}

// PurgePartition purges up to p.Limit messages of each stage of one
// partition in one transaction.
func (d *sqliteDialect) PurgePartition(ctx context.Context, p *dialect.PurgeParams) (dialect.PurgeResult, error) {
	return purgeSQL.Partition(ctx, d.Runner, p)
}

// PurgePreview counts what a purge would take from each partition of a
// queue, in one statement; see dialect.Dialect.
func (d *sqliteDialect) PurgePreview(ctx context.Context, p *dialect.PurgePreviewParams) (map[int64]dialect.PurgeResult, error) {
	return purgeSQL.Preview(ctx, d.Runner, p)
}
