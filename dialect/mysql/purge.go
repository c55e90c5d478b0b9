package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// purgeSQL is a partition's purge (docs/ARCHITECTURE.md, "Purge"). A body
// matches when its headers contain ?headers, one JSON object of every
// header that must match: JSON_CONTAINS needs no JSON path, so no header
// name is ever quoted inside one. Bodies are probed by primary key from
// each incoming or outgoing row (STRAIGHT_JOIN keeps that row's table
// first whatever the statistics say): from incoming in the generation
// i.body_gen names (incomingBody), from outgoing in the same generation's
// table, one arm or term per generation.
var purgeSQL = kit.PurgeSQL{
	LockPartition: kit.Inline(`SELECT id FROM {partitions} WHERE id = ?pid FOR UPDATE`),
	// lease_window: how far past the cursor a live lease's batch may reach.
	LockProcessor: kit.Inline(`SELECT processed_seq,
CASE WHEN locked_until IS NOT NULL AND locked_until > UTC_TIMESTAMP(6) THEN COALESCE(lease_limit, CAST(?largest_batch AS SIGNED)) ELSE 0 END AS lease_window
FROM {processor} WHERE partition_id = ?pid FOR UPDATE`),
	Incoming: kit.Inline(`SELECT i.id, i.body_id FROM {incoming} i
WHERE i.partition_id = ?pid AND i.id > 0 AND JSON_CONTAINS(` + incomingBody("headers") + `, ?headers) ORDER BY i.id LIMIT ?limit`),
	// Counts: one statement, so one snapshot: a message the sequencer
	// moves meanwhile is counted in one stage, not both.
	Counts: kit.Inline(`SELECT p.id AS partition_id,
	(SELECT COUNT(*) FROM {incoming} i
		WHERE i.partition_id = p.id AND i.id > 0 AND JSON_CONTAINS(` + incomingBody("headers") + `, ?headers)) AS incoming,
	(SELECT COUNT(*) FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
	+ (SELECT COUNT(*) FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
	+ (SELECT COUNT(*) FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq AND o.seq <= p.processed_seq + p.lease_window
		AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers)) AS in_flight,
	(SELECT COUNT(*) FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
	+ (SELECT COUNT(*) FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
	+ (SELECT COUNT(*) FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
		WHERE o.partition_id = p.id AND o.seq > p.processed_seq + p.lease_window AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers)) AS outgoing
FROM (SELECT pa.id, pr.processed_seq, CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until > UTC_TIMESTAMP(6)
		THEN COALESCE(pr.lease_limit, CAST(?largest_batch AS SIGNED)) ELSE 0 END AS lease_window
	FROM {partitions} pa JOIN {processor} pr ON pr.partition_id = pa.id WHERE pa.queue = ?queue) p
ORDER BY p.id`),
	Outgoing: kit.Inline(`SELECT m.seq, m.body_id FROM (
(SELECT o.seq, o.body_id FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers) ORDER BY o.seq LIMIT ?limit)
UNION ALL (SELECT o.seq, o.body_id FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers) ORDER BY o.seq LIMIT ?limit)
UNION ALL (SELECT o.seq, o.body_id FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers) ORDER BY o.seq LIMIT ?limit)) m
ORDER BY m.seq LIMIT ?limit`),
	CountOutgoing: kit.Inline(`SELECT (SELECT COUNT(*) FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
+ (SELECT COUNT(*) FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))
+ (SELECT COUNT(*) FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after AND o.seq <= ?upto AND o.purged = 0 AND JSON_CONTAINS(b.headers, ?headers))`),
	DeleteIncoming: kit.Inline(`DELETE FROM {incoming} WHERE partition_id = ?pid AND id IN (?ids)`),
	// One generation's table, ?body or ?outgoing, per run (PerGen).
	DeleteBodies: kit.Inline(`DELETE FROM ?body WHERE id IN (?ids)`),
	Tombstone:    kit.Inline(`UPDATE ?outgoing SET purged = 1 WHERE partition_id = ?pid AND seq IN (?seqs)`),
	// A tombstone keeps its body row (the id, for WaitProcessed and the
	// vacuum's join) but not its data.
	BlankBodies: kit.Inline(`UPDATE ?body SET payload = ?payload, headers = NULL, msg_key = NULL WHERE id IN (?ids)`),
	// Kept on every database so the purge is one flow; only PostgreSQL's
	// one-statement leases read it back.
	CountPurge: kit.Inline(`UPDATE {processor} SET purges = purges + 1 WHERE partition_id = ?pid`),
	PerGen:     true,
}

// PurgePartition purges up to p.Limit messages of each stage of a
// partition in one transaction.
func (d *mysqlDialect) PurgePartition(ctx context.Context, p *dialect.PurgeParams) (dialect.PurgeResult, error) {
	return purgeSQL.Partition(ctx, d.Runner, p)
}

// PurgePreview counts what a purge would take from each partition of a
// queue, in one statement; see dialect.Dialect.
func (d *mysqlDialect) PurgePreview(ctx context.Context, p *dialect.PurgePreviewParams) (map[int64]dialect.PurgeResult, error) {
	return purgeSQL.Preview(ctx, d.Runner, p)
}
