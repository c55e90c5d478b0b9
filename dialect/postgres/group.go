package postgres

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// lockPids is the group locks' partitions ?pids, one array value, sorted:
// the order every group locks rows in. A list made a text per number of
// partitions, planned on every call, and the planning took more server
// time than the run (BENCHMARKS.md, "The group locks prepared"). The
// array is read through a scalar subquery so that no plan sees its
// length: the planner counts a constant array's elements (one or two)
// but guesses ten for a parameter, so every custom plan looked cheaper
// than the generic one and the server planned the statement on every
// call (TestGroupLocksPlannedOnce).
const lockPids = `(SELECT pid FROM unnest((SELECT CAST(?pids AS bigint[]))) AS u(pid) ORDER BY pid) r`

// groupSQL is the grouped leases and acks (engine.GroupLeaser): a few
// statements for many partitions. Each queue has its own lease duration
// and batch size, so those are CASE lists of each partition's own value.
// The writes commit as seqbox's synchronous_commit says, asynchronously
// by default (see processor.go).
var groupSQL = kit.GroupSQL{
	// Skips rows another transaction is leasing; rows are locked in
	// partition order (r is sorted, and the nested loop keeps its order),
	// the order every group locks them in. Each partition's current row
	// is locked from its own LATERAL subquery, by the range currentParam
	// describes (see processor.go). Prepared, the partitions one array
	// value (LockArg, lockPids).
	LockLeasable: kit.Prepare(`SELECT pr.partition_id, pr.processed_seq, pr.attempts
FROM ` + lockPids + `
CROSS JOIN LATERAL (SELECT partition_id, processed_seq, attempts FROM {processor}
	WHERE partition_id = r.pid AND version >= ` + versionHead + `r.pid` + versionTail + `
	AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < now())
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	AND (SELECT o.seq FROM {outgoing} o WHERE o.partition_id = r.pid AND o.seq = {processor}.processed_seq + 1) IS NOT NULL
	FOR NO KEY UPDATE SKIP LOCKED) pr
ORDER BY pr.partition_id`),
	// The always-true set_config condition gives the lease's transaction
	// seqbox's commit setting at no extra round trip (see processor.go).
	TakeLease: kit.Inline(`UPDATE {processor} SET locked_by = ?owner, version = version + 1,
	locked_until = (now() + CAST((CASE partition_id ?lease_cases END) AS double precision) * interval '1 microsecond'),
	lease_limit = (CASE partition_id ?limit_cases END), attempts = attempts + 1
WHERE `+lockedRows+` AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL`,
		kit.List{Name: "lease_cases", Item: `WHEN ?pid THEN ?lease_us`, Sep: " "},
		kit.List{Name: "limit_cases", Item: `WHEN ?pid THEN ?limit`, Sep: " "}),
	// The acks wait for the row lock instead of skipping: the rows are ours
	// unless a lease expired, and a skip would read as a lost lease. top is
	// the last seq above the cursor, by the primary key backwards (never a
	// walk of the pruned rows below it), or the cursor. Prepared as
	// LockLeasable is.
	LockOwned: kit.Prepare(`SELECT pr.partition_id, pr.top
FROM ` + lockPids + `
CROSS JOIN LATERAL (SELECT partition_id, COALESCE((SELECT o.seq FROM {outgoing} o
		WHERE o.partition_id = r.pid AND o.seq > {processor}.processed_seq ORDER BY o.seq DESC LIMIT 1), processed_seq) AS top
	FROM {processor} WHERE partition_id = r.pid AND version >= ` + versionHead + `r.pid` + versionTail + ` AND locked_by = ?owner
	FOR NO KEY UPDATE) pr
ORDER BY pr.partition_id`),
	// Commits as seqbox's setting says: the always-true set_config
	// condition sets it for the statement's transaction at no extra round
	// trip.
	Ack: kit.Inline(`UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, version = version + 1, attempts = 0, last_error = NULL,
	next_attempt_at = NULL, locked_by = NULL, locked_until = NULL
WHERE `+lockedRows+` AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL`,
		kit.List{Name: "cases", Item: `WHEN ?pid THEN ?seq`, Sep: " "}),
	// The ack and the next lease of the partitions in ?more, as one new
	// version of each row: a lease taken by a second UPDATE made two, and
	// under a held snapshot every version stays in the chain each later
	// lookup walks (docs/ARCHITECTURE.md, "Cost that stays flat"). It
	// commits as seqbox's setting says, set by the always-true set_config
	// condition at no extra round trip.
	AckLease: kit.Inline(`UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, version = version + 1, last_error = NULL, next_attempt_at = NULL,
	attempts = CASE WHEN partition_id IN (?more) THEN 1 ELSE 0 END,
	locked_by = CASE WHEN partition_id IN (?more) THEN ?owner END,
	locked_until = CASE WHEN partition_id IN (?more)
		THEN (now() + CAST((CASE partition_id ?lease_cases END) AS double precision) * interval '1 microsecond') END,
	lease_limit = CASE WHEN partition_id IN (?more) THEN (CASE partition_id ?limit_cases END) ELSE lease_limit END
WHERE `+lockedRows+` AND set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true) IS NOT NULL`,
		kit.List{Name: "cases", Item: `WHEN ?pid THEN ?seq`, Sep: " "},
		kit.List{Name: "lease_cases", Item: `WHEN ?pid THEN ?lease_us`, Sep: " "},
		kit.List{Name: "limit_cases", Item: `WHEN ?pid THEN ?limit`, Sep: " "}),
	// Every batch in one statement of constant shape, prepared: each range
	// by the outgoing primary key from its own LATERAL subquery, whose
	// LIMIT keeps the planner from flattening it into a join it could
	// reorder on stale statistics, and the body probed by primary key
	// (docs/ARCHITECTURE.md, "Plans that do not depend on statistics"). A
	// UNION ALL with a branch per partition is planned anew on every call,
	// and the planning costs about as much as the run (BENCHMARKS.md,
	// "Figures behind design choices", "Group read of constant shape").
	//
	// The body is probed inside the range's subquery, where the planner
	// sees outgoing.body_id's statistics (every id distinct). Probed from
	// outside it, the planner knew nothing of the subquery's output and put
	// a Memoize node above the probe: a cache that never hits (each body is
	// read once), which copied every row into it and cost about a fifth of
	// the statement (BENCHMARKS.md, "Figures behind design choices", "Group
	// read without Memoize").
	ReadRanges: kit.Prepare(`SELECT r.pid AS partition_id, o.seq, o.body_id, o.purged, o.msg_key, o.payload_type, o.payload, o.headers, o.created_at
FROM unnest(CAST(?pids AS bigint[]), CAST(?los AS bigint[]), CAST(?his AS bigint[])) AS r(pid, lo, hi)
CROSS JOIN LATERAL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at FROM {outgoing} o
	CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id AND gen = o.gen LIMIT 1) b
	WHERE o.partition_id = r.pid AND o.seq > r.lo AND o.seq <= r.hi ORDER BY o.seq LIMIT ?limit) o`),
	LockArg: func(pids []int64) any { return kit.PGArray(pids) },
	RangesArgs: func(rs []dialect.VacuumRange, limit int) kit.Args {
		pids, los, his := make([]int64, len(rs)), make([]int64, len(rs)), make([]int64, len(rs))
		for i, r := range rs {
			pids[i], los[i], his[i] = r.PartitionID, r.FromSeq, r.ToSeq
		}
		return kit.Args{"pids": kit.PGArray(pids), "los": kit.PGArray(los), "his": kit.PGArray(his), "limit": limit}
	},
}

// ProcessorLeaseGroup takes several partitions' leases in one transaction;
// see engine.GroupLeaser.
func (d *pgDialect) ProcessorLeaseGroup(ctx context.Context, p *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error) {
	return groupSQL.Lease(ctx, d.Runner, p)
}

// ProcessorAckLeaseGroup acks and re-leases several partitions in one
// transaction; see engine.GroupLeaser.
func (d *pgDialect) ProcessorAckLeaseGroup(ctx context.Context, p *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error) {
	return groupSQL.AckAndLease(ctx, d.Runner, p)
}
