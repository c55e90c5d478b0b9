package postgres

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// "Leasable" is written out in every statement that needs it, always the
// same: not parked, no live lease and no retry pending,
//
//	parked_at IS NULL AND (locked_until IS NULL OR locked_until < now())
//	AND (next_attempt_at IS NULL OR next_attempt_at <= now())
//
// "Has work" is one probe of outgoing's primary key: the row after the
// cursor exists (seqs are gap-free above it, tombstones included, and the
// vacuum deletes only at or below it). It is a scalar subquery, (SELECT
// o.seq … o.seq = processed_seq + 1) IS NOT NULL, not EXISTS: the planner
// turns an EXISTS into a semi-join, and on statistics that believe
// outgoing nearly empty it merged the partitions' whole ranges of the
// index (every pruned row a held snapshot keeps included) instead of
// probing it (docs/ARCHITECTURE.md, "Plans that do not depend on
// statistics"). No statement here reads the partitions row: its version
// chain under a held snapshot is not theirs to walk ("Cost that stays
// flat").
//
// Durations arrive in microseconds and are added to now() as
// (now() + CAST(?x_us AS double precision) * interval '1 microsecond'):
// typed, so that a bound parameter needs no inference. The statements of
// seqbox's own transactions that hold the condition
//
//	set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text),
//		current_setting('synchronous_commit')), true) IS NOT NULL
//
// commit as WithSynchronousCommit chose (asynchronously by default): the
// condition is always true, and sets the setting for the statement's
// transaction at no extra round trip; ?sync_commit is bound by the dialect
// (kit.Config.Bound), NULL to keep the session's (docs/ARCHITECTURE.md,
// "Asynchronous commits"). Rows are locked FOR NO KEY UPDATE, all a
// non-key UPDATE needs.

// The processor row is versioned (migration 015; docs/ARCHITECTURE.md,
// "Cost that stays flat"). Every write sets version = version + 1, and
// version is in the primary key: each write is a new entry in the key's
// index, never a heap-only update. A heap-only update is found through the
// row's first index entry and a walk of every version after it; under a
// held snapshot none of them can be pruned, and each lookup of the row
// walked all the versions made since the snapshot began (a partition's
// ack and next lease went from 35 µs to 2.5 ms in 90 s). The current row
// is the highest version: a backward probe of the key stops at the first
// row it can see, however many dead ones lie below it. Reads take it as
// a LATERAL subquery (currentRow); a write or a lock names it by
//
//	partition_id = ?pid AND version >= (the highest version it can see)
//
// (currentParam): an index range that starts at the current row, and
// that a row updated meanwhile still matches when the write, after
// waiting for its lock, checks the newer version again (">=": with "="
// the newer version would fail the check and the write would change
// nothing). The table keeps a floor of pages (processorFloor), so that no
// statistics make a scan of it cheaper than these probes.
const (
	versionHead  = `(SELECT pv.version FROM {processor} pv WHERE pv.partition_id = `
	versionTail  = ` ORDER BY pv.version DESC LIMIT 1)`
	currentParam = `{processor}.partition_id = ?pid AND {processor}.version >= ` + versionHead + `?pid` + versionTail
	// lockedRows is the current rows of partitions ?pids (a list), which
	// the statement's transaction has locked, so that none can have
	// changed: a TID scan, whatever the statistics.
	lockedRows = `ctid = ANY(ARRAY(SELECT c.ctid FROM unnest(CAST(ARRAY[?pids] AS bigint[])) AS r(pid)
	CROSS JOIN LATERAL (SELECT ctid FROM {processor} WHERE partition_id = r.pid ORDER BY version DESC LIMIT 1) c))`
)

// currentRow is a LATERAL read of partition pid's current processor row,
// named as.
func currentRow(pid, as string) string {
	return `LATERAL (SELECT * FROM {processor} WHERE partition_id = ` + pid + ` ORDER BY version DESC LIMIT 1) ` + as
}

// processorSQL is the processor's statements of kit's shapes.
var processorSQL = kit.ProcessorSQL{
	ReadyList: kit.Inline(`SELECT pr.partition_id FROM unnest(CAST(ARRAY[?pids] AS bigint[])) AS r(pid)
CROSS JOIN ` + currentRow("r.pid", "pr") + `
WHERE (SELECT o.seq FROM {outgoing} o WHERE o.partition_id = pr.partition_id AND o.seq = pr.processed_seq + 1) IS NOT NULL
	AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < now())
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())`),
	// The transactional handler's transaction: the always-true set_config
	// condition of its lock gives it seqbox's commit setting
	// (asynchronous by default), at no extra round trip.
	Lock: kit.Prepare(`SELECT processed_seq, attempts FROM {processor}
WHERE ` + currentParam + `
	AND parked_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	AND (SELECT o.seq FROM {outgoing} o WHERE o.partition_id = ?pid AND o.seq = {processor}.processed_seq + 1) IS NOT NULL
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL
FOR NO KEY UPDATE SKIP LOCKED`),
	// A row's body is probed by primary key from the row: LATERAL with a
	// LIMIT is never flattened into a join the planner may reorder. A queue
	// table's statistics describe whatever it held when last vacuumed: VACUUM
	// of a body table whose pages were all pruned records a density near
	// zero, the planner then believes body has one row and scans its whole
	// index as the outer side of a join (docs/ARCHITECTURE.md, "Plans that
	// do not depend on statistics"; BENCHMARKS.md, "Figures behind design
	// choices", "Body probed by primary key"). Every read of body here has this shape.
	OutgoingList: kit.Prepare(`SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
WHERE o.partition_id = ?pid AND o.seq > ?after ORDER BY o.seq LIMIT ?limit`),
	// next_attempt_at is set only for a retry (?retry_us > 0), parked_at
	// only to park (?park > 0): any other outcome clears it. These run in
	// the caller's transaction, or in a leased ack's own with dead letters
	// (rare), which commits as the server is set.
	Update: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, version = version + 1, attempts = ?attempts, last_error = ?last_error,
	next_attempt_at = CASE WHEN CAST(?retry_us AS BIGINT) > 0 THEN (now() + CAST(?retry_us AS double precision) * interval '1 microsecond') END,
	parked_at = CASE WHEN CAST(?park AS BIGINT) > 0 THEN now() END, locked_by = NULL, locked_until = NULL
WHERE ` + currentParam),
	UpdateGuarded: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, version = version + 1, attempts = ?attempts, last_error = ?last_error,
	next_attempt_at = CASE WHEN CAST(?retry_us AS BIGINT) > 0 THEN (now() + CAST(?retry_us AS double precision) * interval '1 microsecond') END,
	parked_at = CASE WHEN CAST(?park AS BIGINT) > 0 THEN now() END, locked_by = NULL, locked_until = NULL
WHERE ` + currentParam + ` AND locked_by = ?owner`),
	DeadLetters: kit.DeadLetterWriteSQL{
		Insert: kit.Inline(`INSERT INTO {dead_letters} (partition_id, seq, message_id, msg_key, payload_type, payload, headers,
	created_at, failed_at, last_error, attempts, status) VALUES ?rows
RETURNING id, partition_id, seq`,
			kit.Rows(`(?pid, ?seq, ?message_id, ?key, ?payload_type, ?payload, ?headers, ?created_at, now(), ?last_error, ?attempts, ?status)`)),
		InsertReturns: true,
		Resolve:       kit.Inline(`UPDATE {dead_letters} SET status = ?resolved, completed_at = now() WHERE status = ?replayed AND replay_id IN (?ids)`),
	},
}

// leases is the processor's one-statement fast paths.
type leases struct {
	// Batch takes the lease and reads the batch in one round trip
	// (kit.LeaseArgs). The LEFT JOIN LATERAL keeps one row when the lease
	// is taken but no message is readable yet. The attempt it counts is the
	// trace a process crash leaves; by default it commits asynchronously,
	// so a server crash can lose that count (see ProcessorLease in package
	// dialect for why that is safe). seen_purges is the purge count the
	// statement's snapshot sees (see fresh). The always-true set_config
	// condition sets seqbox's synchronous_commit for the statement at no
	// extra round trip.
	Batch *kit.Stmt
	// Ack records an outcome without dead letters: one UPDATE, guarded by
	// the lease when ?owner is not empty, committed as seqbox's setting
	// says (the always-true set_config condition, at no extra round trip).
	Ack *kit.Stmt
	// AckLease is a clean, lease-guarded ack and Batch in one statement: it
	// keeps the lease (attempts = 1: the next batch's delivery is counted
	// now) when the partition has more sequenced rows, and releases it
	// otherwise. Committed as Ack is.
	AckLease *kit.Stmt
	// Returning takes the lease alone, in the transaction of an ack and
	// lease that the one statement cannot take (kit.LeaseReturning): the
	// sub-select makes an empty partition never take a lease.
	Returning *kit.Stmt
}

var leaseSQL = leases{
	Batch: kit.Prepare(`WITH l AS (UPDATE {processor} SET locked_by = ?owner, version = version + 1,
	locked_until = (now() + CAST(?lease_us AS double precision) * interval '1 microsecond'),
	lease_limit = ?limit, attempts = attempts + 1
	WHERE ` + currentParam + `
	AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < now())
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	AND (SELECT o.seq FROM {outgoing} o WHERE o.partition_id = ?pid AND o.seq = {processor}.processed_seq + 1) IS NOT NULL
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL
	RETURNING processed_seq, attempts, purges)
SELECT l.processed_seq, l.attempts, l.purges, (SELECT pv.purges FROM {processor} pv WHERE pv.partition_id = ?pid ORDER BY pv.version DESC LIMIT 1) AS seen_purges,
	m.seq, m.body_id, m.purged, m.msg_key, m.payload_type, m.payload, m.headers, m.created_at
FROM l LEFT JOIN LATERAL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
	WHERE o.partition_id = ?pid AND o.seq > l.processed_seq ORDER BY o.seq LIMIT ?limit) m ON true
ORDER BY m.seq`),
	Ack: kit.Prepare(`UPDATE {processor} SET processed_seq = ?seq, version = version + 1, attempts = ?attempts, last_error = ?last_error,
	next_attempt_at = CASE WHEN CAST(?retry_us AS bigint) > 0 THEN (now() + CAST(?retry_us AS double precision) * interval '1 microsecond') END,
	parked_at = CASE WHEN CAST(?park AS bigint) > 0 THEN now() END, locked_by = NULL, locked_until = NULL
WHERE ` + currentParam + ` AND (CAST(?owner AS text) = '' OR locked_by = ?owner)
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL`),
	AckLease: kit.Prepare(`WITH s AS (SELECT (SELECT seq FROM {outgoing} WHERE partition_id = ?pid AND seq = CAST(?seq AS bigint) + 1) IS NOT NULL AS more),
u AS (UPDATE {processor} SET processed_seq = ?seq, version = version + 1,
	attempts = CASE WHEN (SELECT more FROM s) THEN 1 ELSE 0 END,
	last_error = NULL, next_attempt_at = NULL,
	locked_by = CASE WHEN (SELECT more FROM s) THEN locked_by END,
	locked_until = CASE WHEN (SELECT more FROM s) THEN (now() + CAST(?lease_us AS double precision) * interval '1 microsecond') END,
	lease_limit = ?limit
	WHERE ` + currentParam + ` AND locked_by = ?owner
	AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL
	RETURNING processed_seq, attempts, purges, locked_by IS NOT NULL AS leased)
SELECT u.processed_seq, u.attempts, u.purges, (SELECT pv.purges FROM {processor} pv WHERE pv.partition_id = ?pid ORDER BY pv.version DESC LIMIT 1) AS seen_purges, u.leased,
	m.seq, m.body_id, m.purged, m.msg_key, m.payload_type, m.payload, m.headers, m.created_at
FROM u LEFT JOIN LATERAL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
	WHERE o.partition_id = ?pid AND o.seq > u.processed_seq AND u.leased ORDER BY o.seq LIMIT ?limit) m ON true
ORDER BY m.seq`),
	Returning: kit.Prepare(`UPDATE {processor} SET locked_by = ?owner, version = version + 1,
	locked_until = (now() + CAST(?lease_us AS double precision) * interval '1 microsecond'),
	lease_limit = ?limit, attempts = attempts + 1
WHERE ` + currentParam + `
	AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < now())
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	AND (SELECT o.seq FROM {outgoing} o WHERE o.partition_id = ?pid AND o.seq = {processor}.processed_seq + 1) IS NOT NULL
RETURNING processed_seq, attempts`),
}

// ProcessorReadyList returns partitions with work and no lease or backoff.
func (d *pgDialect) ProcessorReadyList(ctx context.Context, p *dialect.ProcessorReadyListParams) ([]int64, error) {
	return processorSQL.Ready(ctx, d.Runner, p)
}

// ProcessorLock row-locks the processor row inside p.Conn (transactional mode).
func (d *pgDialect) ProcessorLock(ctx context.Context, p *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	return processorSQL.LockRow(ctx, d.Runner, p)
}

// OutgoingList reads the next batch after the cursor, joined with bodies.
func (d *pgDialect) OutgoingList(ctx context.Context, p *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	return processorSQL.Outgoing(ctx, d.Runner, p)
}

// ProcessorUpdate records a batch outcome on p.Conn; see dialect.Dialect.
func (d *pgDialect) ProcessorUpdate(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	return processorSQL.Record(ctx, d.Runner, p)
}

type leaseRow struct {
	Leased       *bool      `bun:"leased"` // AckLease only
	ProcessedSeq int64      `bun:"processed_seq"`
	Attempts     int        `bun:"attempts"`
	Purges       int64      `bun:"purges"`
	SeenPurges   int64      `bun:"seen_purges"`
	Seq          *int64     `bun:"seq"`
	BodyID       []byte     `bun:"body_id"`
	Purged       *int       `bun:"purged"`
	Key          []byte     `bun:"msg_key"`
	PayloadType  *string    `bun:"payload_type"`
	Payload      []byte     `bun:"payload"`
	Headers      *string    `bun:"headers"`
	CreatedAt    *time.Time `bun:"created_at"`
}

// ProcessorLease takes the lease and reads the batch in one statement.
func (d *pgDialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	var rows []leaseRow
	if err := d.Query(ctx, d.DB(), leaseSQL.Batch, kit.LeaseArgs(p), &rows); err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	if len(rows) == 0 {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return d.fresh(ctx, p, leaseResult(rows), rows[0])
}

// fresh re-reads the batch of a lease statement that read it from a
// snapshot older than a purge of the partition: the statement waited for
// the purge's lock on the processor row, and its read of outgoing, which
// shares the statement's snapshot, cannot see the tombstones. The purge
// counter the UPDATE returns (the row's latest version) then differs from
// the one the statement's own snapshot sees (docs/ARCHITECTURE.md, "Purge").
func (d *pgDialect) fresh(ctx context.Context, p *dialect.ProcessorLeaseParams, res dialect.ProcessorLeaseResult, r leaseRow) (dialect.ProcessorLeaseResult, error) {
	if r.Purges == r.SeenPurges {
		return res, nil
	}
	return processorSQL.LeaseRead(ctx, d.Runner, d.DB(), p, res.State)
}

// leaseResult converts the rows of a lease statement.
func leaseResult(rows []leaseRow) dialect.ProcessorLeaseResult {
	res := dialect.ProcessorLeaseResult{Leased: true,
		State: dialect.ProcessorState{ProcessedSeq: rows[0].ProcessedSeq, Attempts: rows[0].Attempts - 1}}
	for _, r := range rows {
		if r.Seq == nil {
			continue
		}
		m := dialect.OutgoingMessage{Seq: *r.Seq, Key: string(r.Key), PayloadType: *r.PayloadType, Payload: r.Payload, CreatedAt: *r.CreatedAt}
		m.Purged = r.Purged != nil && *r.Purged != 0
		copy(m.ID[:], r.BodyID)
		if r.Headers != nil {
			m.Headers = []byte(*r.Headers)
		}
		res.Messages = append(res.Messages, m)
	}
	return res
}

// ProcessorAck records an outcome; with dead letters to insert or replays
// to resolve it takes a transaction, otherwise it is the one UPDATE.
func (d *pgDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	if err := kit.OwnTransaction("ProcessorAck", p); err != nil {
		return err
	}
	if len(p.DeadLetters) > 0 || len(p.ResolveReplays) > 0 {
		return processorSQL.RecordInTx(ctx, d.Runner, p)
	}
	// ?owner always: the statement checks the lease only when it is not "".
	n, err := d.Affected(ctx, d.DB(), leaseSQL.Ack, kit.UpdateArgs(p, true))
	if err != nil {
		return err
	}
	if n == 0 && p.Owner != "" {
		return dialect.ErrLeaseLost
	}
	return nil
}

// ProcessorAckLease acks a clean advance and re-leases in one statement;
// see engine.AckLeaser. Anything else takes a transaction.
func (d *pgDialect) ProcessorAckLease(ctx context.Context, p *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	if err := kit.OwnTransaction("ProcessorAckLease", p.Ack); err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	ack, next := p.Ack, p.Next
	if ack.Owner == "" || ack.Owner != next.Owner || ack.PartitionID != next.PartitionID || !ack.Clean() {
		return processorSQL.AckLeaseInTx(ctx, d.Runner, p, kit.LeaseReturning(d.Runner, leaseSQL.Returning))
	}
	var rows []leaseRow
	args := kit.Args{"pid": ack.PartitionID, "seq": ack.ProcessedSeq, "lease_us": next.Duration.Microseconds(),
		"owner": ack.Owner, "limit": next.Limit}
	if err := d.Query(ctx, d.DB(), leaseSQL.AckLease, args, &rows); err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	if len(rows) == 0 {
		return dialect.ProcessorLeaseResult{}, dialect.ErrLeaseLost
	}
	if rows[0].Leased == nil || !*rows[0].Leased {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return d.fresh(ctx, next, leaseResult(rows), rows[0])
}
