// Package postgres is the seqbox dialect for PostgreSQL 15 and later, with
// any driver bun supports (pgdriver, pgx stdlib, lib/pq). It imports none:
// listening for other processes' wake-ups goes through a Listener the
// application passes in (WithListener).
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// pgDialect is the PostgreSQL implementation of dialect.Dialect. It writes
// several operations as single statements (data-modifying CTEs) where that
// measured faster, and implements engine.AckLeaser and engine.GroupLeaser.
type pgDialect struct {
	*sqlcore.Core
	listen ListenFunc // nil: no wake-ups from other processes
}

var _ dialect.Dialect = (*pgDialect)(nil)

// Option configures the PostgreSQL dialect (seqbox.Builder.PostgresOptions).
type Option struct{ apply func(*pgDialect) error }

// WithListener makes the dialect listen for other processes' wake-ups
// (docs/ARCHITECTURE.md, "Wake-ups across processes") on the connections
// listen opens. Without it, other processes' work is found by polling.
func WithListener(listen ListenFunc) Option {
	return Option{func(d *pgDialect) error {
		if listen == nil {
			return errors.New("seqbox: postgres.WithListener: nil ListenFunc")
		}
		d.listen = listen
		return nil
	}}
}

// New returns the dialect for db with tables named prefix+name.
func New(db *bun.DB, prefix string, opts ...Option) (dialect.Dialect, error) {
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return nil, err
	}
	core, err := sqlcore.New(sqlcore.Config{
		DB: db, Prefix: prefix, Flavor: flavor{}, Bootstrap: boot, Migrations: migs,
		Limits: dialect.Limits{MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20},
		Tuning: dialect.Tuning{SequencerWorkers: 4, VacuumWorkers: 4},
	})
	if err != nil {
		return nil, err
	}
	if err := core.Check(insertMessagesSQL, moveLockSQL, moveSelectSQL, moveUpdateSQL, sequenceMoveSQL,
		moveManyLockSQL, moveManySelectSQL, moveManyUpdateSQL, leaseBatchSQL, ackSQL, ackLeaseSQL, groupReadSQL, vacuumDeleteSQL); err != nil {
		return nil, err
	}
	d := &pgDialect{Core: core}
	for i, opt := range opts {
		if opt.apply == nil {
			return nil, fmt.Errorf("seqbox: postgres.New: option %d is the zero Option", i)
		}
		if err := opt.apply(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// schemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func schemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

// ---------------------------------------------------------------- enqueue

// insertMessagesSQL writes a chunk in one round trip: a data-modifying CTE
// always runs, referenced or not.
const insertMessagesSQL = "WITH b AS (INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?) " +
	"INSERT INTO {incoming} (partition_id, body_id) VALUES ?"

// cteInsertMaxRows is the largest chunk written as one statement. Measured
// per message on 2 cores (4 producers, write path only): the CTE wins at 1
// and 10 rows per transaction (it saves a round trip: 45-46k vs 43k
// msgs/s at 10), ties at 30, and loses at 100 (93k vs 98-120k msgs/s), where
// the two plain INSERTs cost the server less per row.
const cteInsertMaxRows = 49

// MessageInsertMany writes each chunk: small ones in one statement, larger
// ones as two.
func (d *pgDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	return sqlcore.InsertChunks(ctx, p, func(ctx context.Context, conn bun.IConn, rows []dialect.MessageRow) error {
		if len(rows) > cteInsertMaxRows {
			return d.InsertTwoStatements(ctx, conn, rows)
		}
		_, err := d.Raw(conn, d.SQL(insertMessagesSQL), d.BodyValues(rows), sqlcore.IncomingValues(rows)).Exec(ctx)
		return d.Wrap(err)
	})
}

// ---------------------------------------------------------------- sequencer

// A move reads a partition's incoming rows in (xid, id) order — xid is the
// inserting transaction's id — starting at the partition's lower bound
// partitions.incoming_xid. Every row below the bound is final (its
// transaction ended) and already moved, so the rows a move deleted but no
// vacuum could remove yet (an unrelated transaction holding a snapshot,
// autovacuum off) are never read again: a read costs the same at any age.
//
// The order keeps the guarantee: a transaction that committed before
// another began got its xid first. After a move that saw snapshot xmin X
// (the oldest transaction still running, whose rows may yet appear), the
// bound becomes max(bound, X), or max(bound, min(X, last xid moved)) when
// the batch was full and rows of that transaction may remain. A read-only
// transaction, however long, has no xid and never holds X back; a long
// unrelated write transaction does, and reads then cost as they did before.

// The statements of the several-statement move.
const (
	moveLockSQL = "SELECT sequence, (incoming_xid::text)::bigint, (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint " +
		"FROM {partitions} WHERE id = ?{read_setup}{partition_lock}"
	moveSelectSQL = "SELECT id, ctid::text AS tid, body_id, (xid::text)::bigint AS xid FROM {incoming} " +
		"WHERE partition_id = ? AND xid >= CAST(CAST(? AS text) AS xid8) ORDER BY xid, id LIMIT ?"
	moveUpdateSQL = "UPDATE {partitions} SET sequence = ?, incoming_xid = CAST(CAST(? AS text) AS xid8) WHERE id = ?"
)

type moveRow struct {
	ID     int64  `bun:"id"`
	TID    string `bun:"tid"`
	BodyID []byte `bun:"body_id"`
	XID    int64  `bun:"xid"`
}

// nextBound is the lower bound after a move; see the comment above.
func nextBound(bound, xmin, lastXID int64, full bool) int64 {
	next := xmin
	if full {
		next = min(xmin, lastXID)
	}
	return max(bound, next)
}

// sequenceMoveStatements is the move as several simple statements.
func (d *pgDialect) sequenceMoveStatements(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	var res dialect.SequenceMoveResult
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.SequenceMoveResult{PartitionID: p.PartitionID}
		var locks []struct {
			Sequence int64 `bun:"sequence"`
			Bound    int64 `bun:"incoming_xid"`
			XMin     int64 `bun:"pg_snapshot_xmin"`
		}
		if err := d.Raw(tx, d.SQL(moveLockSQL), p.PartitionID).Scan(ctx, &locks); err != nil {
			return err
		}
		if len(locks) == 0 {
			res.Skipped = true
			return nil
		}
		lock := locks[0]
		var rows []moveRow
		if err := d.Raw(tx, d.SQL(moveSelectSQL), p.PartitionID, lock.Bound, p.Limit).Scan(ctx, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		base, n := lock.Sequence, int64(len(rows))
		bound := nextBound(lock.Bound, lock.XMin, rows[len(rows)-1].XID, len(rows) == p.Limit)
		if _, err := d.Raw(tx, d.SQL(moveUpdateSQL), base+n, bound, p.PartitionID).Exec(ctx); err != nil {
			return err
		}
		var err error
		res, err = sqlcore.WriteOneMove(ctx, d.Core, tx, p.PartitionID, base, rows, func(r moveRow) sqlcore.MovedRow {
			return sqlcore.MovedRow{IncomingID: r.ID, IncomingTID: r.TID, BodyID: r.BodyID}
		})
		return err
	})
	if err != nil {
		return dialect.SequenceMoveResult{}, err
	}
	return res, nil
}

// sequenceMoveSQL moves one batch of a partition in one statement (one
// round trip instead of seven). Its shape follows what was measured on a
// 200k-row backlog: sel filters on the constant partition id, del deletes by
// ctid = ANY(ARRAY(…)), a TID scan whatever the statistics say (a join here
// is planned as a scan of incoming; "id = ANY" was once planned, with
// autovacuum off and statistics from a near-empty table, as a full scan of
// the (partition_id, xid, id) index: 111 s per move, and the sequencer
// stalled for good — docs/ARCHITECTURE.md, "Cost that stays flat"). The
// partition lock makes the ctids stable: only its holder deletes the
// partition's rows, and nothing updates them. Rows are numbered in (xid, id) order because DELETE …
// RETURNING has no order. All CTEs share one snapshot, so the base seq comes
// from the UPDATE's own RETURNING, and the xmin is the read's. An empty
// batch writes nothing.
const sequenceMoveSQL = `WITH p AS (SELECT id, incoming_xid FROM {partitions} WHERE id = ?pid{async_commit} FOR NO KEY UPDATE SKIP LOCKED),
sel AS (SELECT ctid AS t FROM {incoming} WHERE partition_id = ?pid AND xid >= (SELECT incoming_xid FROM p) ORDER BY xid, id LIMIT ?limit),
del AS (DELETE FROM {incoming} WHERE ctid = ANY(ARRAY(SELECT t FROM sel)) RETURNING id, xid, body_id),
num AS (SELECT body_id, row_number() OVER (ORDER BY xid, id) AS rn FROM del),
cnt AS (SELECT count(*) AS n, max(xid) AS last_xid FROM del),
upd AS (UPDATE {partitions} u SET sequence = u.sequence + cnt.n,
	incoming_xid = GREATEST(u.incoming_xid, CASE WHEN cnt.n = ?limit
		THEN LEAST(pg_snapshot_xmin(pg_current_snapshot()), cnt.last_xid)
		ELSE pg_snapshot_xmin(pg_current_snapshot()) END)
	FROM cnt WHERE u.id = ?pid AND cnt.n > 0
	RETURNING u.sequence - cnt.n AS base),
ins AS (INSERT INTO {outgoing} (partition_id, seq, body_id) SELECT ?pid, upd.base + num.rn, num.body_id FROM num CROSS JOIN upd RETURNING 1)
SELECT (SELECT count(*) FROM p) AS locked, (SELECT count(*) FROM ins) AS moved,
	COALESCE((SELECT base FROM upd), 0) AS base`

// SequenceMove moves one batch. Moves that follow a full one use the single
// statement: it drains a backlog faster (measured 74k vs 64k msgs/s).
// Small moves are cheaper as several simple statements: planning the CTE
// costs more database CPU than the round trips it saves (measured end to
// end on a 2-core host: 11.6k vs 15.3k msgs/s).
func (d *pgDialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	if !p.Backlog {
		return d.sequenceMoveStatements(ctx, p)
	}
	var locked, moved, base int64
	err := d.Raw(d.DB(), d.SQL(sequenceMoveSQL), sqlcore.Args{"pid": p.PartitionID, "limit": p.Limit}).Scan(ctx, &locked, &moved, &base)
	if err != nil {
		return dialect.SequenceMoveResult{}, d.Wrap(err)
	}
	if locked == 0 {
		return dialect.SequenceMoveResult{PartitionID: p.PartitionID, Skipped: true}, nil
	}
	if moved == 0 {
		return dialect.SequenceMoveResult{PartitionID: p.PartitionID}, nil
	}
	return dialect.SequenceMoveResult{PartitionID: p.PartitionID, Moved: int(moved), FirstSeq: base + 1, LastSeq: base + moved}, nil
}

// The statements of the several-partition move: the same five steps for
// any number of partitions, each list one array value.
const (
	moveManyLockSQL = "SELECT id, sequence, (incoming_xid::text)::bigint AS bound, " +
		"(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint AS xmin " +
		"FROM {partitions} WHERE id = ANY(CAST(? AS bigint[])){read_setup} ORDER BY id{partition_lock}"
	// Each partition's head of line from its own bound, by index (LATERAL).
	moveManySelectSQL = "SELECT r.pid AS partition_id, m.id, m.tid, m.body_id, m.xid " +
		"FROM unnest(CAST(? AS bigint[]), CAST(? AS bigint[])) AS r(pid, bound) CROSS JOIN LATERAL " +
		"(SELECT id, ctid::text AS tid, body_id, (xid::text)::bigint AS xid FROM {incoming} WHERE partition_id = r.pid " +
		"AND xid >= CAST(CAST(r.bound AS text) AS xid8) ORDER BY xid, id LIMIT ?) m ORDER BY r.pid, m.xid, m.id"
	moveManyUpdateSQL = "UPDATE {partitions} p SET sequence = u.seq, incoming_xid = CAST(CAST(u.bound AS text) AS xid8) " +
		"FROM unnest(CAST(? AS bigint[]), CAST(? AS bigint[]), CAST(? AS bigint[])) AS u(pid, seq, bound) WHERE p.id = u.pid"
)

type moveManyRow struct {
	PartitionID int64  `bun:"partition_id"`
	ID          int64  `bun:"id"`
	TID         string `bun:"tid"`
	BodyID      []byte `bun:"body_id"`
	XID         int64  `bun:"xid"`
}

func (r moveManyRow) Keys() (pid, id int64) { return r.PartitionID, r.ID }

// SequenceMoveMany moves several partitions in one transaction of five
// statements, each partition from its own lower bound.
func (d *pgDialect) SequenceMoveMany(ctx context.Context, p *dialect.SequenceMoveManyParams) ([]dialect.SequenceMoveResult, error) {
	var out []dialect.SequenceMoveResult
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = make([]dialect.SequenceMoveResult, len(p.PartitionIDs))
		var locks []struct {
			ID       int64 `bun:"id"`
			Sequence int64 `bun:"sequence"`
			Bound    int64 `bun:"bound"`
			XMin     int64 `bun:"xmin"`
		}
		if err := d.Raw(tx, d.SQL(moveManyLockSQL), sqlcore.IDArray(p.PartitionIDs, '{', '}')).Scan(ctx, &locks); err != nil {
			return err
		}
		sequence := make(map[int64]int64, len(locks))
		pids, bounds := make([]int64, len(locks)), make([]int64, len(locks))
		for i, l := range locks {
			sequence[l.ID], pids[i], bounds[i] = l.Sequence, l.ID, l.Bound
		}
		for i, pid := range p.PartitionIDs {
			_, locked := sequence[pid]
			out[i] = dialect.SequenceMoveResult{PartitionID: pid, Skipped: !locked}
		}
		if len(locks) == 0 {
			return nil
		}
		var rows []moveManyRow
		if err := d.Raw(tx, d.SQL(moveManySelectSQL), sqlcore.IDArray(pids, '{', '}'), sqlcore.IDArray(bounds, '{', '}'), p.Limit).
			Scan(ctx, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		moved, seqs := sqlcore.NumberRows(rows, sequence)
		// Rows come per partition in (xid, id) order: the last of each
		// partition is its last xid read.
		lastXID := map[int64]int64{}
		for _, r := range rows {
			lastXID[r.PartitionID] = r.XID
		}
		var upPIDs, upSeqs, upBounds []int64
		for _, l := range locks {
			if m := moved[l.ID]; m != nil {
				upPIDs = append(upPIDs, l.ID)
				upSeqs = append(upSeqs, m.Base+int64(m.N))
				upBounds = append(upBounds, nextBound(l.Bound, l.XMin, lastXID[l.ID], m.N == p.Limit))
			}
		}
		if _, err := d.Raw(tx, d.SQL(moveManyUpdateSQL), sqlcore.IDArray(upPIDs, '{', '}'), sqlcore.IDArray(upSeqs, '{', '}'),
			sqlcore.IDArray(upBounds, '{', '}')).Exec(ctx); err != nil {
			return err
		}
		writes := sqlcore.MovedRows(rows, seqs, func(r moveManyRow) []byte { return r.BodyID })
		for i := range writes {
			writes[i].IncomingTID = rows[i].TID
		}
		if err := d.WriteMove(ctx, tx, writes); err != nil {
			return err
		}
		sqlcore.FillMoved(out, moved)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ---------------------------------------------------------------- processor

// leaseBatchSQL takes the lease and reads the batch in one round trip. The
// LEFT JOIN LATERAL keeps one row when the lease is taken but no message
// is readable yet. The attempt it counts is the trace a process crash
// leaves; it commits asynchronously, so a server crash can lose that count
// (see ProcessorLease in package dialect for why that is safe).
const leaseBatchSQL = `WITH l AS (UPDATE {processor} SET locked_by = ?owner, locked_until = {now_plus_lease},
	lease_limit = ?limit, attempts = attempts + 1
	WHERE partition_id = ?pid AND {leasable}
	AND processed_seq < (SELECT sequence FROM {partitions} WHERE id = ?pid){async_commit}
	RETURNING processed_seq, attempts, purges)
SELECT l.processed_seq, l.attempts, l.purges, (SELECT purges FROM {processor} WHERE partition_id = ?pid) AS seen_purges, m.seq, m.body_id, m.purged, m.msg_key, m.payload_type, m.payload, m.headers, m.created_at
FROM l LEFT JOIN LATERAL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o {body_of_o}
	WHERE o.partition_id = ?pid AND o.seq > l.processed_seq ORDER BY o.seq LIMIT ?limit) m ON true
ORDER BY m.seq`

type leaseRow struct {
	Leased       *bool      `bun:"leased"` // ackLeaseSQL only
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
	args := sqlcore.Args{"owner": p.Owner, "lease_us": p.Duration.Microseconds(), "pid": p.PartitionID, "limit": p.Limit}
	if err := d.QueryBound(ctx, d.DB(), leaseBatchSQL, args, &rows); err != nil {
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
	return d.LeaseRead(ctx, d.DB(), p, res.State)
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

// ackSQL records an outcome without dead letters: one UPDATE, guarded by
// the lease when there is an owner, committed asynchronously.
const ackSQL = "UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error, " +
	"next_attempt_at = CASE WHEN CAST(?retry_us AS bigint) > 0 THEN {now_plus_retry} END, " +
	"parked_at = CASE WHEN CAST(?park AS bigint) > 0 THEN {now} END, locked_by = NULL, locked_until = NULL " +
	"WHERE partition_id = ?pid AND (CAST(?owner AS text) = '' OR locked_by = ?owner){async_commit}"

// ProcessorAck records an outcome; with dead letters to insert it takes a
// transaction, otherwise it is the one UPDATE.
func (d *pgDialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	if len(p.DeadLetters) > 0 || len(p.ResolveReplays) > 0 {
		return d.AckInTx(ctx, p)
	}
	res, err := d.ExecBound(ctx, d.DB(), ackSQL, sqlcore.UpdateArgs(p))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 && p.Owner != "" {
		return dialect.ErrLeaseLost
	}
	return nil
}

// ackLeaseSQL is a clean, lease-guarded ack and leaseBatchSQL in one
// statement: it keeps the lease (attempts = 1: the next batch's delivery is
// counted now) when the partition has more sequenced rows, and releases it
// otherwise.
const ackLeaseSQL = `WITH s AS (SELECT sequence FROM {partitions} WHERE id = ?pid),
u AS (UPDATE {processor} SET processed_seq = ?seq,
	attempts = CASE WHEN ?seq < (SELECT sequence FROM s) THEN 1 ELSE 0 END,
	last_error = NULL, next_attempt_at = NULL,
	locked_by = CASE WHEN ?seq < (SELECT sequence FROM s) THEN locked_by END,
	locked_until = CASE WHEN ?seq < (SELECT sequence FROM s) THEN {now_plus_lease} END,
	lease_limit = ?limit
	WHERE partition_id = ?pid AND locked_by = ?owner{async_commit}
	RETURNING processed_seq, attempts, purges, locked_by IS NOT NULL AS leased)
SELECT u.processed_seq, u.attempts, u.purges, (SELECT purges FROM {processor} WHERE partition_id = ?pid) AS seen_purges, u.leased, m.seq, m.body_id, m.purged, m.msg_key, m.payload_type, m.payload, m.headers, m.created_at
FROM u LEFT JOIN LATERAL (SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o {body_of_o}
	WHERE o.partition_id = ?pid AND o.seq > u.processed_seq AND u.leased ORDER BY o.seq LIMIT ?limit) m ON true
ORDER BY m.seq`

// ProcessorAckLease acks a clean advance and re-leases in one statement;
// see processor.AckLeaser. Anything else takes a transaction.
func (d *pgDialect) ProcessorAckLease(ctx context.Context, p *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
	ack, next := p.Ack, p.Next
	if ack.Owner == "" || ack.Owner != next.Owner || ack.PartitionID != next.PartitionID || !ack.Clean() {
		return d.AckLeaseInTx(ctx, p, d.LeaseReturning)
	}
	var rows []leaseRow
	args := sqlcore.Args{"pid": ack.PartitionID, "seq": ack.ProcessedSeq, "lease_us": next.Duration.Microseconds(),
		"owner": ack.Owner, "limit": next.Limit}
	if err := d.QueryBound(ctx, d.DB(), ackLeaseSQL, args, &rows); err != nil {
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

// ProcessorLeaseGroup takes several partitions' leases in one transaction;
// see processor.GroupLeaser.
func (d *pgDialect) ProcessorLeaseGroup(ctx context.Context, p *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error) {
	return d.LeaseGroupStatements(ctx, p)
}

// ProcessorAckLeaseGroup acks and re-leases several partitions in one
// transaction; see processor.GroupLeaser.
func (d *pgDialect) ProcessorAckLeaseGroup(ctx context.Context, p *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error) {
	return d.AckLeaseGroupStatements(ctx, p)
}

// groupReadSQL is the group read (sqlcore.GroupRangeReader): each range
// by the outgoing primary key from its own LATERAL subquery, whose LIMIT
// keeps the planner from flattening it into a join it could reorder on
// stale statistics ("Plans that do not depend on statistics").
const groupReadSQL = "SELECT r.pid AS partition_id, o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at " +
	"FROM unnest(CAST(?pids AS bigint[]), CAST(?los AS bigint[]), CAST(?his AS bigint[])) AS r(pid, lo, hi) " +
	"CROSS JOIN LATERAL (SELECT o.seq, o.body_id, o.purged FROM {outgoing} o WHERE o.partition_id = r.pid " +
	"AND o.seq > r.lo AND o.seq <= r.hi ORDER BY o.seq LIMIT ?limit) o {body_of_o}"

func (flavor) GroupReadSQL() string { return groupReadSQL }

// ---------------------------------------------------------------- vacuum

// vacuumDeleteSQL deletes the outgoing rows of every range and their
// bodies and records each range as pruned (monotonic), in one statement.
// The ranges are three parallel arrays: one value each, whatever their count.
const vacuumDeleteSQL = `WITH r AS (SELECT * FROM unnest(CAST(?pids AS bigint[]), CAST(?froms AS bigint[]), CAST(?tos AS bigint[])) AS r(pid, lo, hi)),
d AS (DELETE FROM {outgoing} o USING r WHERE o.partition_id = r.pid AND o.seq > r.lo AND o.seq <= r.hi RETURNING o.body_id),
b AS (DELETE FROM {body} WHERE id = ANY(ARRAY(SELECT body_id FROM d)) RETURNING 1),
v AS (UPDATE {vacuum_counter} v SET pruned_seq = r.hi FROM r WHERE v.partition_id = r.pid AND v.pruned_seq < r.hi RETURNING 1)
SELECT (SELECT count(*) FROM d) AS deleted, (SELECT count(*) FROM b) + (SELECT count(*) FROM v) AS others`

// VacuumDelete deletes every range in one statement, planned with nested
// loops only: the planner otherwise joins the deleted ids to body by
// hashing a sequential scan of the whole body table, backlog and dead rows
// included (measured on a 200k-row body: 68-120 ms per 3,000-row chunk with
// the hash join, 17 ms with primary-key probes). It commits asynchronously
// (docs/ARCHITECTURE.md, "Asynchronous commits").
func (d *pgDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	pids, froms, tos := make([]int64, len(p.Ranges)), make([]int64, len(p.Ranges)), make([]int64, len(p.Ranges))
	for i, r := range p.Ranges {
		pids[i], froms[i], tos[i] = r.PartitionID, r.FromSeq, r.ToSeq
	}
	args := sqlcore.Args{"pids": sqlcore.IDArray(pids, '{', '}'), "froms": sqlcore.IDArray(froms, '{', '}'), "tos": sqlcore.IDArray(tos, '{', '}')}
	var deleted, others int64
	err := d.runWithSettings(ctx, "set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), "+
		"set_config('synchronous_commit', 'off', true)", func(ctx context.Context, tx bun.Tx) error {
		return d.Raw(tx, d.SQL(vacuumDeleteSQL), args).Scan(ctx, &deleted, &others)
	})
	return int(deleted), d.Wrap(err)
}

// TableVacuum vacuums seqbox's tables when autovacuum is off: without it
// the rows vacuum and the sequencer delete are never reclaimed, so the
// files grow with total traffic and the indexes with them (guarantee 7
// holds for rows, not for disk). With autovacuum on it does nothing: the
// server's own vacuum (with these tables' vacuum_truncate off) is better
// placed. One process at a time takes the turn, by a session advisory lock.
// See vacuum.TableVacuumer.
func (d *pgDialect) TableVacuum(ctx context.Context, _ *dialect.TableVacuumParams) (dialect.TableVacuumResult, error) {
	var autovacuum string
	if err := d.Raw(d.DB(), "SELECT current_setting('autovacuum')").Scan(ctx, &autovacuum); err != nil {
		return dialect.TableVacuumResult{}, d.Wrap(err)
	}
	if autovacuum == "on" {
		return dialect.TableVacuumResult{Reason: "autovacuum is on"}, nil
	}
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		return dialect.TableVacuumResult{}, d.Wrap(err)
	}
	defer conn.Close()
	lock := d.Tables().Prefix + "table_vacuum"
	var got bool
	if err := d.Raw(conn, "SELECT pg_try_advisory_lock(hashtext(?))", lock).Scan(ctx, &got); err != nil {
		return dialect.TableVacuumResult{}, d.Wrap(err)
	}
	if !got {
		return dialect.TableVacuumResult{Reason: "another process is vacuuming"}, nil
	}
	defer func() {
		_, _ = d.Raw(conn, "SELECT pg_advisory_unlock(hashtext(?))", lock).Exec(context.WithoutCancel(ctx))
	}()
	// VACUUM cannot run in a transaction: each statement autocommits on the
	// pinned connection. SKIP_LOCKED passes over a table another VACUUM
	// holds. One table per statement keeps each under a driver's read
	// timeout (pgdriver's is 10 s by default) on a busy server.
	for _, table := range []string{"{incoming}", "{outgoing}", "{body}", "{partitions}", "{processor}", "{vacuum_counter}", "{dedup_keys}"} {
		if _, err := d.Raw(conn, d.SQL("VACUUM (SKIP_LOCKED) "+table)).Exec(ctx); err != nil {
			return dialect.TableVacuumResult{}, d.Wrap(err)
		}
	}
	return dialect.TableVacuumResult{Vacuumed: true}, nil
}

// ---------------------------------------------------------------- stats

// PartitionStats runs with JIT off: the planner, with no statistics on the
// tiny partitions table, assumes thousands of rows and JIT-compiles the
// per-partition subqueries (measured 25-250 ms of compilation per call,
// for a query that runs in a few milliseconds).
func (d *pgDialect) PartitionStats(ctx context.Context, _ *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error) {
	var out []dialect.PartitionStats
	err := d.runWithSettings(ctx, "set_config('jit', 'off', true)", func(ctx context.Context, tx bun.Tx) error {
		var err error
		out, err = d.PartitionStatsOn(ctx, tx)
		return err
	})
	return out, d.Wrap(err)
}

// runWithSettings runs fn in an outbox transaction after SELECTing
// settings, set_config(…, true) calls that last until the transaction ends:
// planner choices are made per statement, before any of it runs.
func (d *pgDialect) runWithSettings(ctx context.Context, settings string, fn func(ctx context.Context, tx bun.Tx) error) error {
	return d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Raw(tx, "SELECT "+settings).Exec(ctx); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

type flavor struct{}

func (flavor) Name() dialect.Name        { return dialect.Postgres }
func (flavor) Features() dialect.Feature { return dialect.MultiProcess }

func (flavor) Fragments() map[string]string {
	return map[string]string{
		"now":                "now()",
		"insert_ignore":      "INSERT",
		"insert_ignore_tail": "ON CONFLICT DO NOTHING",
		// FOR NO KEY UPDATE does not conflict with the KEY SHARE a foreign
		// key would take, and is all a non-key UPDATE needs.
		"partition_lock":  " FOR NO KEY UPDATE SKIP LOCKED",
		"row_lock":        " FOR NO KEY UPDATE SKIP LOCKED",
		"row_lock_wait":   " FOR NO KEY UPDATE",
		"time_value":      "?",
		"message_id_type": "bytea",
		"table_exists":    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?",
		// Bitmap scans off for the rest of the move's transaction
		// (set_config with is_local, evaluated with the lock, costs no round
		// trip). The planner estimates fewer rows per partition than the
		// batch limit and picks a bitmap heap scan plus sort, which visits
		// every deleted-but-not-vacuumed row of the partition on each move;
		// a plain index scan marks those index entries dead once and skips
		// them afterwards (measured on 190k dead rows: 1,717 → 134 buffers,
		// 1.8 → 0.2 ms; under load 4.5 ms per read before).
		"read_setup": " AND set_config('enable_bitmapscan', 'off', true) = 'off'{async_commit}",
		// seqbox's own transactions commit without waiting for their WAL
		// flush; see "Asynchronous commits" in docs/ARCHITECTURE.md. A
		// condition that is always true, evaluated in the statement, sets
		// it for the statement's transaction at no extra round trip.
		"bigint_type":  "BIGINT",
		"async_commit": " AND set_config('synchronous_commit', 'off', true) = 'off'",
		// By ctid, read under the partition lock, which makes it stable:
		// only the lock holder deletes a partition's rows and nothing
		// updates them. A join of the ids to the primary key was planned,
		// once autovacuum's ANALYZE had seen a table of dead rows, as a
		// scan of incoming: one move ran 290 s and the sequencer stalled;
		// "id IN (…1000 literals…)" took 1 ms to plan and became a
		// sequential scan (docs/ARCHITECTURE.md, "Cost that stays flat").
		"delete_incoming": "DELETE FROM {incoming} WHERE ctid = ANY(CAST(? AS tid[]))",
		// Headers are JSON text; typed values need no inference.
		"header_match": "(b.headers::jsonb ->> CAST(? AS text)) = CAST(? AS text)",
		// Rows an upsert wrote: inserted, or taken over.
		"dedup_returning":       " RETURNING dedup_key",
		"dead_letter_returning": " RETURNING id, partition_id, seq",
		"dedup_holders":         "SELECT dedup_key, message_id FROM {dedup_keys} WHERE dedup_key IN (?) AND queue = ? FOR NO KEY UPDATE",
		// An unexpired key's row is left alone but locked (ON CONFLICT DO
		// UPDATE locks the row even when its WHERE is false).
		"dedup_upsert": "ON CONFLICT (queue, dedup_key) DO UPDATE SET message_id = EXCLUDED.message_id, " +
			"expires_at = EXCLUDED.expires_at WHERE {dedup_keys}.expires_at <= now()",
		// No DELETE … LIMIT: the chunk is picked by ctid from the expiry
		// index. A key taken over meanwhile has a new ctid and a new expiry,
		// and is left (both are checked again on the row's latest version).
		"dedup_expire": "DELETE FROM {dedup_keys} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {dedup_keys} " +
			"WHERE expires_at <= now() ORDER BY expires_at LIMIT ?)) AND expires_at <= now()",
		// A row's body, probed by primary key from the row (LATERAL with a
		// LIMIT is never flattened into a join the planner may reorder).
		// A queue table's statistics describe whatever it held when last
		// vacuumed: VACUUM of a body table whose pages were all pruned
		// records a density near zero, the planner then believes body has
		// one row and scans its whole index as the outer side of the join
		// (seen under autovacuum: 4 s per batch read, 8 s per prune).
		"body_of_o": "CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = o.body_id LIMIT 1) b",
		"body_of_i": "CROSS JOIN LATERAL (SELECT * FROM {body} WHERE id = i.body_id LIMIT 1) b",
		// Rows below the partition's lower bound are final and moved (see
		// "sequencer" above): the reconciler and Stats skip them too.
		"incoming_pending": "i.xid >= pa.incoming_xid",
		"incoming_order":   "i.xid, i.id",
	}
}

func (flavor) NowPlus(placeholder string) string {
	// Typed, so that a bound parameter needs no inference.
	return "(now() + CAST(" + placeholder + " AS double precision) * interval '1 microsecond')"
}
func (flavor) TxOptions() *sql.TxOptions { return nil }
func (flavor) BeginWrite() string        { return "" }

// sqlState reads a PostgreSQL error's SQLSTATE from any driver without
// importing one: pgx and lib/pq expose SQLState(), pgdriver Field('C').
func sqlState(err error) string {
	var withState interface{ SQLState() string }
	var withField interface{ Field(byte) string }
	switch {
	case errors.As(err, &withState):
		return withState.SQLState()
	case errors.As(err, &withField):
		return withField.Field('C')
	}
	return ""
}

// IsRetryable recognises serialization failures, deadlocks and lock
// timeouts.
func (flavor) IsRetryable(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// IsDisconnect recognises a lost connection: class 08, or a backend
// terminated by an administrator (pg_terminate_backend) or a shutdown.
func (flavor) IsDisconnect(err error) bool {
	state := sqlState(err)
	switch {
	case strings.HasPrefix(state, "08"), state == "57P01", state == "57P02", state == "57P03":
		return true
	}
	return sqlcore.IsNetworkError(err)
}

// Lock takes a session advisory lock; concurrent CREATE TABLE IF NOT EXISTS
// races on PostgreSQL without it.
func (flavor) Lock(ctx context.Context, conn bun.Conn, name string) (func(context.Context) error, error) {
	if _, err := conn.NewRaw("SELECT pg_advisory_lock(hashtext(?))", name).Exec(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := conn.NewRaw("SELECT pg_advisory_unlock(hashtext(?))", name).Exec(ctx)
		if err != nil {
			return fmt.Errorf("pg_advisory_unlock: %w", err)
		}
		return nil
	}, nil
}

// DeleteList renders the moved rows' ctids as one tid[] literal,
// {"(0,1)","(0,2)"}: the delete is then a TID scan whatever the planner's
// statistics say (see delete_incoming).
func (flavor) DeleteList(rows []sqlcore.MovedRow) any {
	b := make([]byte, 0, 12*len(rows)+2)
	b = append(b, '{')
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, r.IncomingTID...)
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

func (flavor) DedupKeyList(keys [][]byte) any { return bun.List(keys) }

func (flavor) NumberedParams() bool { return true }
