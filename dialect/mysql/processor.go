package mysql

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// "Leasable" is written out in each statement that takes a lease or polls
// for one: not parked, no live lease and no retry pending,
//
//	parked_at IS NULL AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6))
//	AND (next_attempt_at IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))
//
// and the ready poll, the leases and the group lock must keep agreeing on it.
// "Has work" is one probe of outgoing's primary key, an eq_ref: the row
// after the cursor exists (seqs are gap-free above it, tombstones
// included, and the vacuum deletes only at or below it). A correlated
// "seq > processed_seq" would be read by the partition prefix and
// filtered, through every row the vacuum deleted that InnoDB still keeps
// delete-marked for an open read view. It is a scalar subquery, (SELECT
// o.seq … o.seq = processed_seq + 1) IS NOT NULL, which the optimizer
// runs as written; an EXISTS it may turn into a semi-join or a
// materialized IN, whose choice follows the statistics. Subqueries are
// plain reads: under READ COMMITTED they lock nothing in outgoing, even in
// a locking statement. No statement here reads the partitions row.

// processorSQL is the processor's statements. The hot path's (lock,
// outgoing list, outcome) run prepared: the server parses them once per
// connection.
var processorSQL = kit.ProcessorSQL{
	ReadyList: kit.Inline(`SELECT pr.partition_id FROM {processor} pr
WHERE pr.partition_id IN (?pids)
AND ` + headExists("pr.partition_id", "pr.processed_seq") + `
AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6))
AND (next_attempt_at IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))`),
	// Transactional mode: the row lock, not locked_until, is what keeps
	// other processes out (docs/ARCHITECTURE.md, "Tables and locks"); SKIP
	// LOCKED passes over a row another transaction holds.
	Lock: kit.Prepare(`SELECT processed_seq, attempts FROM {processor}
WHERE partition_id = ?pid AND parked_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))
AND ` + headExists("?pid", "{processor}.processed_seq") + ` FOR UPDATE SKIP LOCKED`),
	// The body probed by primary key from each outgoing row: STRAIGHT_JOIN
	// keeps outgoing first whatever the statistics say. One arm per
	// generation, each a range of its primary key from ?after: the batch
	// is the first ?limit of the three, which usually come from one.
	OutgoingList: kit.Prepare(`SELECT m.seq, m.body_id, m.purged, m.msg_key, m.payload_type, m.payload, m.headers, m.created_at FROM (
(SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing_g0} o STRAIGHT_JOIN {body_g0} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after ORDER BY o.seq LIMIT ?limit)
UNION ALL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing_g1} o STRAIGHT_JOIN {body_g1} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after ORDER BY o.seq LIMIT ?limit)
UNION ALL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing_g2} o STRAIGHT_JOIN {body_g2} b ON b.id = o.body_id
	WHERE o.partition_id = ?pid AND o.seq > ?after ORDER BY o.seq LIMIT ?limit)) m
ORDER BY m.seq LIMIT ?limit`),
	// next_attempt_at is set only for a retry (?retry_us > 0), parked_at
	// only to park (?park > 0): any other outcome clears it.
	Update: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error,
next_attempt_at = CASE WHEN CAST(?retry_us AS SIGNED) > 0 THEN TIMESTAMPADD(MICROSECOND, ?retry_us, UTC_TIMESTAMP(6)) END,
parked_at = CASE WHEN CAST(?park AS SIGNED) > 0 THEN UTC_TIMESTAMP(6) END,
locked_by = NULL, locked_until = NULL
WHERE partition_id = ?pid`),
	UpdateGuarded: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error,
next_attempt_at = CASE WHEN CAST(?retry_us AS SIGNED) > 0 THEN TIMESTAMPADD(MICROSECOND, ?retry_us, UTC_TIMESTAMP(6)) END,
parked_at = CASE WHEN CAST(?park AS SIGNED) > 0 THEN UTC_TIMESTAMP(6) END,
locked_by = NULL, locked_until = NULL
WHERE partition_id = ?pid AND locked_by = ?owner`),
	DeadLetters: kit.DeadLetterWriteSQL{
		Insert: kit.Inline(`INSERT INTO {dead_letters} (partition_id, seq, message_id, msg_key, payload_type, payload, headers,
created_at, failed_at, last_error, attempts, status) VALUES ?rows`,
			kit.Rows(`(?pid, ?seq, ?message_id, ?key, ?payload_type, ?payload, ?headers, ?created_at, UTC_TIMESTAMP(6), ?last_error, ?attempts, ?status)`)),
		// MariaDB has INSERT … RETURNING, MySQL does not: the letters are
		// read back by partition from the INSERT's first id.
		InsertReturns: false,
		// The letters the INSERT wrote, in its transaction: the partitions'
		// letters from its first id on. Their processor rows are locked by
		// the transaction, so no other letter of theirs can appear
		// meanwhile; ids need not be consecutive.
		Written: kit.Inline(`SELECT id, partition_id, seq FROM {dead_letters} WHERE partition_id IN (?pids) AND id >= ?first ORDER BY id`),
		Resolve: kit.Inline(`UPDATE {dead_letters} SET status = ?resolved, completed_at = UTC_TIMESTAMP(6)
WHERE status = ?replayed AND replay_id IN (?ids)`),
	},
}

// leaseStmts take one partition's lease without UPDATE … RETURNING.
type leaseStmts struct {
	// Lease leases partition ?pid to ?owner for ?lease_us with batch limit
	// ?limit when it is leasable and has work, counting an attempt. The
	// attempt counts at acquire, so a crash before the ack leaves a trace;
	// the sub-select makes an empty partition never take a lease.
	Lease *kit.Stmt
	// State reads back, in the same transaction, the row Lease updated.
	State *kit.Stmt
}

var leaseSQL = leaseStmts{
	Lease: kit.Prepare(`UPDATE {processor} SET locked_by = ?owner, locked_until = TIMESTAMPADD(MICROSECOND, ?lease_us, UTC_TIMESTAMP(6)),
lease_limit = ?limit, attempts = attempts + 1
WHERE partition_id = ?pid
AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6))
AND (next_attempt_at IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))
AND ` + headExists("?pid", "{processor}.processed_seq")),
	State: kit.Prepare(`SELECT processed_seq, attempts FROM {processor} WHERE partition_id = ?pid AND locked_by = ?owner`),
}

// ProcessorReadyList returns partitions with work and no lease or backoff.
func (d *mysqlDialect) ProcessorReadyList(ctx context.Context, p *dialect.ProcessorReadyListParams) ([]int64, error) {
	return processorSQL.Ready(ctx, d.Runner, p)
}

// ProcessorLease takes the lease with UPDATE then SELECT in one READ
// COMMITTED transaction, then reads the batch.
func (d *mysqlDialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	var state dialect.ProcessorState
	var ok bool
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		state, ok, err = d.lease(ctx, tx, p)
		return err
	})
	if err != nil || !ok {
		return dialect.ProcessorLeaseResult{}, err
	}
	return processorSQL.LeaseRead(ctx, d.Runner, d.DB(), p, state)
}

// ProcessorAck records an outcome in its own transaction.
func (d *mysqlDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return processorSQL.RecordInTx(ctx, d.Runner, p)
}

// ProcessorAckLease acks and re-leases in one transaction; see engine.AckLeaser.
func (d *mysqlDialect) ProcessorAckLease(ctx context.Context, p *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	return processorSQL.AckLeaseInTx(ctx, d.Runner, p, d.lease)
}

// ProcessorLock row-locks the processor row inside p.Conn (transactional mode).
func (d *mysqlDialect) ProcessorLock(ctx context.Context, p *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	return processorSQL.LockRow(ctx, d.Runner, p)
}

// OutgoingList reads the next batch joined with bodies.
func (d *mysqlDialect) OutgoingList(ctx context.Context, p *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	return processorSQL.Outgoing(ctx, d.Runner, p)
}

// ProcessorUpdate records a batch outcome on p.Conn.
func (d *mysqlDialect) ProcessorUpdate(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return processorSQL.Record(ctx, d.Runner, p)
}
