package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// groupSQL is the group leases and acks (engine.GroupLeaser): a few
// statements for many partitions. Each queue has its own lease duration
// and batch size, so both are CASE lists by partition.
var groupSQL = kit.GroupSQL{
	// Leasable rows with work, in partition order (the order every group
	// locks them in); SKIP LOCKED passes over rows another transaction is
	// leasing.
	LockLeasable: kit.Inline(`SELECT partition_id, processed_seq, attempts FROM {processor}
WHERE partition_id IN (?pids)
AND parked_at IS NULL AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6))
AND (next_attempt_at IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))
AND ` + headExists("{processor}.partition_id", "{processor}.processed_seq") + `
ORDER BY partition_id FOR UPDATE SKIP LOCKED`),
	TakeLease: kit.Inline(`UPDATE {processor} SET locked_by = ?owner,
locked_until = TIMESTAMPADD(MICROSECOND, (CASE partition_id ?lease_cases END), UTC_TIMESTAMP(6)),
lease_limit = (CASE partition_id ?limit_cases END), attempts = attempts + 1
WHERE partition_id IN (?pids)`,
		kit.List{Name: "lease_cases", Item: `WHEN ?pid THEN ?lease_us`, Sep: " "},
		kit.List{Name: "limit_cases", Item: `WHEN ?pid THEN ?limit`, Sep: " "}),
	// The acks wait for the row lock instead of skipping: the rows are
	// ours unless a lease expired, and a skip would read as a lost lease.
	// top is probes of the generations' primary keys (see Tops in
	// sequencer.go): is seq cursor+1 there, and if so the partition's last
	// entry, read backwards; otherwise the cursor.
	LockOwned: kit.Inline(`SELECT partition_id, ` + lastSeq("{processor}.partition_id", "{processor}.processed_seq") + ` AS top
FROM {processor} WHERE partition_id IN (?pids) AND locked_by = ?owner ORDER BY partition_id FOR UPDATE`),
	Ack: kit.Inline(`UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, attempts = 0, last_error = NULL,
next_attempt_at = NULL, locked_by = NULL, locked_until = NULL
WHERE partition_id IN (?pids)`,
		kit.List{Name: "cases", Item: `WHEN ?pid THEN ?seq`, Sep: " "}),
	// The ack and the next lease of the partitions in ?more as one new
	// version of each row: a lease taken by a second UPDATE made two
	// (docs/ARCHITECTURE.md, "Cost that stays flat").
	AckLease: kit.Inline(`UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, last_error = NULL, next_attempt_at = NULL,
attempts = CASE WHEN partition_id IN (?more) THEN 1 ELSE 0 END,
locked_by = CASE WHEN partition_id IN (?more) THEN ?owner END,
locked_until = CASE WHEN partition_id IN (?more) THEN TIMESTAMPADD(MICROSECOND, (CASE partition_id ?lease_cases END), UTC_TIMESTAMP(6)) END,
lease_limit = CASE WHEN partition_id IN (?more) THEN (CASE partition_id ?limit_cases END) ELSE lease_limit END
WHERE partition_id IN (?pids)`,
		kit.List{Name: "cases", Item: `WHEN ?pid THEN ?seq`, Sep: " "},
		kit.List{Name: "lease_cases", Item: `WHEN ?pid THEN ?lease_us`, Sep: " "},
		kit.List{Name: "limit_cases", Item: `WHEN ?pid THEN ?limit`, Sep: " "}),
	// Every batch in one prepared statement, a seq range per partition
	// (seqs are gap-free above processed_seq, so "the next n" is (lo, hi]),
	// the ranges one JSON value [[pid,lo,hi],…]. The partition_id
	// condition is written as a range (>= and <=) so that the server reads
	// outgoing by "range checked for each record": one index range per
	// partition, from its cursor to its limit; as an equality it would
	// read every entry of the partition and filter. The body is probed by
	// primary key from each outgoing row. One arm per generation, in any
	// order (the flow sorts the rows).
	ReadRanges: kit.Prepare(`SELECT STRAIGHT_JOIN r.pid AS partition_id, o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM JSON_TABLE(?ranges, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r
JOIN {outgoing_g0} o ON o.partition_id >= r.pid AND o.partition_id <= r.pid AND o.seq > r.lo AND o.seq <= r.hi
JOIN {body_g0} b ON b.id = o.body_id
UNION ALL SELECT STRAIGHT_JOIN r.pid AS partition_id, o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM JSON_TABLE(?ranges, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r
JOIN {outgoing_g1} o ON o.partition_id >= r.pid AND o.partition_id <= r.pid AND o.seq > r.lo AND o.seq <= r.hi
JOIN {body_g1} b ON b.id = o.body_id
UNION ALL SELECT STRAIGHT_JOIN r.pid AS partition_id, o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
FROM JSON_TABLE(?ranges, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r
JOIN {outgoing_g2} o ON o.partition_id >= r.pid AND o.partition_id <= r.pid AND o.seq > r.lo AND o.seq <= r.hi
JOIN {body_g2} b ON b.id = o.body_id`),
	RangesArgs: func(rs []dialect.VacuumRange, _ int) kit.Args { return kit.Args{"ranges": kit.RangesJSON(rs)} },
}

// ProcessorLeaseGroup takes several partitions' leases in one transaction;
// see engine.GroupLeaser.
func (d *mysqlDialect) ProcessorLeaseGroup(ctx context.Context, p *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error) {
	return groupSQL.Lease(ctx, d.Runner, p)
}

// ProcessorAckLeaseGroup acks and re-leases several partitions in one
// transaction; see engine.GroupLeaser.
func (d *mysqlDialect) ProcessorAckLeaseGroup(ctx context.Context, p *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error) {
	return groupSQL.AckAndLease(ctx, d.Runner, p)
}
