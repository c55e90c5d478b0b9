package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// The processor's statements. "Leasable" is one condition, written out
// in each statement that needs it: not parked, no live lease and no retry
// pending. "Has work" is a probe of each generation's primary key: the
// row after the cursor exists (headExists; seqs are gap-free above it,
// and the vacuum deletes only at or below it). Lease, lock, batch read
// and outcome are the hot path and run prepared: SQLite parses each once
// per connection.
var processorSQL = kit.ProcessorSQL{
	ReadyList: kit.Inline(`SELECT pr.partition_id FROM {processor} pr
WHERE pr.partition_id IN (?pids)
AND ` + headExists("pr.partition_id", "pr.processed_seq") + `
AND parked_at IS NULL
AND (locked_until IS NULL OR locked_until < strftime('%Y-%m-%d %H:%M:%f', 'now'))
AND (next_attempt_at IS NULL OR next_attempt_at <= strftime('%Y-%m-%d %H:%M:%f', 'now'))`),
	// No row lock to take: the transaction holds the write lock from its
	// start, so the row stays as read until it commits.
	Lock: kit.Prepare(`SELECT processed_seq, attempts FROM {processor} WHERE partition_id = ?pid
AND parked_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= strftime('%Y-%m-%d %H:%M:%f', 'now'))
AND ` + headExists("?pid", "{processor}.processed_seq")),
	// One arm per generation, each a range of its primary key from ?after
	// joined to its bodies by theirs. The ORDER BY of the compound makes
	// SQLite merge the three arms in seq order, each read in its key's
	// order, and stop at ?limit: the batch usually comes from one.
	OutgoingList: kit.Prepare(`SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM {outgoing_g0} o JOIN {body_g0} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after
UNION ALL SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM {outgoing_g1} o JOIN {body_g1} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after
UNION ALL SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM {outgoing_g2} o JOIN {body_g2} b ON b.id = o.body_id
WHERE o.partition_id = ?pid AND o.seq > ?after
ORDER BY 1 LIMIT ?limit`),
	// next_attempt_at is set only for a retry (?retry_us > 0), parked_at
	// only to park (?park > 0): any other outcome clears it.
	Update: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error,
next_attempt_at = CASE WHEN CAST(?retry_us AS INTEGER) > 0 THEN strftime('%Y-%m-%d %H:%M:%f', 'now', (?retry_us / 1000000.0) || ' seconds') END,
parked_at = CASE WHEN CAST(?park AS INTEGER) > 0 THEN strftime('%Y-%m-%d %H:%M:%f', 'now') END,
locked_by = NULL, locked_until = NULL
WHERE partition_id = ?pid`),
	UpdateGuarded: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error,
next_attempt_at = CASE WHEN CAST(?retry_us AS INTEGER) > 0 THEN strftime('%Y-%m-%d %H:%M:%f', 'now', (?retry_us / 1000000.0) || ' seconds') END,
parked_at = CASE WHEN CAST(?park AS INTEGER) > 0 THEN strftime('%Y-%m-%d %H:%M:%f', 'now') END,
locked_by = NULL, locked_until = NULL
WHERE partition_id = ?pid AND locked_by = ?owner`),
	DeadLetters: kit.DeadLetterWriteSQL{
		// RETURNING gives each letter's id in the same statement.
		Insert: kit.Inline(`INSERT INTO {dead_letters} (partition_id, seq, message_id, msg_key, payload_type, payload, headers,
created_at, failed_at, last_error, attempts, status) VALUES ?rows RETURNING id, partition_id, seq`,
			kit.Rows(`(?pid, ?seq, ?message_id, ?key, ?payload_type, ?payload, ?headers, ?created_at, strftime('%Y-%m-%d %H:%M:%f', 'now'), ?last_error, ?attempts, ?status)`)),
		InsertReturns: true,
		Resolve:       kit.Inline(`UPDATE {dead_letters} SET status = ?resolved, completed_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE status = ?replayed AND replay_id IN (?ids)`),
	},
}

// leaseStmts is the lease.
type leaseStmts struct {
	// Lease takes partition ?pid's lease for ?owner and returns the row's
	// state. attempts counts at acquire, so a crash before the ack leaves
	// a trace; the sub-select makes an empty partition never take a lease.
	Lease *kit.Stmt
}

var leaseSQL = leaseStmts{
	Lease: kit.Prepare(`UPDATE {processor} SET locked_by = ?owner,
locked_until = strftime('%Y-%m-%d %H:%M:%f', 'now', (?lease_us / 1000000.0) || ' seconds'),
lease_limit = ?limit, attempts = attempts + 1
WHERE partition_id = ?pid
AND parked_at IS NULL
AND (locked_until IS NULL OR locked_until < strftime('%Y-%m-%d %H:%M:%f', 'now'))
AND (next_attempt_at IS NULL OR next_attempt_at <= strftime('%Y-%m-%d %H:%M:%f', 'now'))
AND ` + headExists("?pid", "{processor}.processed_seq") + `
RETURNING processed_seq, attempts`),
}

// ProcessorReadyList returns partitions with work and no lease or backoff.
func (d *sqliteDialect) ProcessorReadyList(ctx context.Context, p *dialect.ProcessorReadyListParams) ([]int64, error) {
	return processorSQL.Ready(ctx, d.Runner, p)
}

// ProcessorLease takes the lease with UPDATE … RETURNING through the
// writer, then reads the batch outside it: the writer is held for the
// one statement only.
func (d *sqliteDialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	unlock := d.LockWriter()
	state, ok, err := kit.LeaseReturning(d.Runner, leaseSQL.Lease)(ctx, d.DB(), p)
	unlock()
	if err != nil || !ok {
		return dialect.ProcessorLeaseResult{}, err
	}
	return processorSQL.LeaseRead(ctx, d.Runner, d.DB(), p, state)
}

// ProcessorAck records an outcome in its own transaction.
func (d *sqliteDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return processorSQL.RecordInTx(ctx, d.Runner, p)
}

// ProcessorLock reads the processor row inside p.Conn (transactional
// mode), which holds the write lock.
func (d *sqliteDialect) ProcessorLock(ctx context.Context, p *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	return processorSQL.LockRow(ctx, d.Runner, p)
}

// OutgoingList reads the next batch after the cursor, joined with bodies.
func (d *sqliteDialect) OutgoingList(ctx context.Context, p *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	return processorSQL.Outgoing(ctx, d.Runner, p)
}

// ProcessorUpdate records a batch outcome on p.Conn.
func (d *sqliteDialect) ProcessorUpdate(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return processorSQL.Record(ctx, d.Runner, p)
}
