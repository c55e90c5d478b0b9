// Package postgres is the seqbox dialect for PostgreSQL 15 and later, with
// any driver bun supports (pgdriver, pgx stdlib, lib/pq).
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

// Dialect is the PostgreSQL implementation of dialect.Dialect.
type Dialect struct {
	*sqlcore.Core
	q pgQueries
}

var _ dialect.Dialect = (*Dialect)(nil)

// New returns the dialect for db with tables named prefix+name.
func New(db *bun.DB, prefix string) (*Dialect, error) {
	cfg, err := config(db, prefix)
	if err != nil {
		return nil, err
	}
	core, err := sqlcore.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Dialect{Core: core, q: buildQueries(core.Tables())}, nil
}

// SchemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func SchemaStatements(prefix string) ([]string, error) {
	return sqlcore.RenderFS(migrationFS, prefix)
}

// config is shared by New and SchemaStatements.
func config(db *bun.DB, prefix string) (sqlcore.Config, error) {
	boot, migs, err := sqlcore.LoadMigrations(migrationFS)
	if err != nil {
		return sqlcore.Config{}, err
	}
	return sqlcore.Config{
		DB: db, Prefix: prefix, Flavor: flavor{}, Bootstrap: boot, Migrations: migs,
		MaxPayloadBytes: 64 << 20, MaxStatementBytes: 256 << 20,
	}, nil
}

type pgQueries struct {
	insertMessages string
	vacuumDelete   string
	sequenceMove   string
	leaseBatch     string
	ack            string
	ackLease       string
}

func buildQueries(t dialect.Tables) pgQueries {
	return pgQueries{
		// One round trip: a data-modifying CTE always runs, referenced or not.
		insertMessages: "WITH b AS (INSERT INTO " + t.Body + " (id, payload_type, payload, headers, created_at) VALUES ?) " +
			"INSERT INTO " + t.Incoming + " (partition_id, body_id) VALUES ?",
		vacuumDelete: "WITH d AS (DELETE FROM " + t.Outgoing + " WHERE partition_id = ? AND seq > ? AND seq <= ? RETURNING body_id) " +
			"DELETE FROM " + t.Body + " b USING d WHERE b.id = d.body_id",
		sequenceMove: tableNames(t).Replace(sequenceMoveSQL),
		leaseBatch:   tableNames(t).Replace(leaseBatchSQL),
		ack:          tableNames(t).Replace(ackSQL),
		ackLease:     tableNames(t).Replace(ackLeaseSQL),
	}
}

func tableNames(t dialect.Tables) *strings.Replacer {
	return strings.NewReplacer("{partitions}", t.Partitions, "{incoming}", t.Incoming, "{outgoing}", t.Outgoing,
		"{body}", t.Body, "{processor}", t.Processor, "{vacuum_counter}", t.VacuumCounter)
}

// leaseBatchSQL takes the lease and reads the batch in one round trip. The
// LEFT JOIN LATERAL keeps one row when the lease is taken but no message
// is readable yet. It commits durably: the attempt it counts is the trace
// a crash leaves.
const leaseBatchSQL = `WITH l AS (UPDATE {processor} SET locked_by = ?, locked_until = now() + ? * interval '1 microsecond',
	attempts = attempts + 1
	WHERE partition_id = ? AND (locked_until IS NULL OR locked_until < now())
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	AND processed_seq < (SELECT sequence FROM {partitions} WHERE id = ?)
	RETURNING processed_seq, attempts)
SELECT l.processed_seq, l.attempts, m.seq, m.body_id, m.payload_type, m.payload, m.headers, m.created_at
FROM l LEFT JOIN LATERAL (SELECT o.seq, o.body_id, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o JOIN {body} b ON b.id = o.body_id
	WHERE o.partition_id = ? AND o.seq > l.processed_seq ORDER BY o.seq LIMIT ?) m ON true
ORDER BY m.seq`

// ackSQL records a leased batch's outcome in one round trip, guarded by the
// lease, and bumps the vacuum counter only if the guard held.
const ackSQL = `WITH u AS (UPDATE {processor} SET processed_seq = ?, attempts = ?, last_error = ?,
	next_attempt_at = CASE WHEN ? > 0 THEN now() + ? * interval '1 microsecond' END,
	locked_by = NULL, locked_until = NULL
	WHERE partition_id = ? AND locked_by = ? RETURNING 1),
v AS (UPDATE {vacuum_counter} SET counter = counter + ? WHERE partition_id = ? AND ? > 0 AND EXISTS (SELECT 1 FROM u) RETURNING 1)
SELECT (SELECT count(*) FROM u) AS updated, (SELECT count(*) FROM v) AS bumped`

// ackLeaseSQL is ackSQL for a clean advance and leaseBatchSQL in one
// statement: it keeps the lease (attempts = 1: the next batch's delivery is
// counted now) when the partition has more sequenced rows, and releases it
// otherwise. The vacuum counter moves only if the ack's guard held.
const ackLeaseSQL = `WITH s AS (SELECT sequence FROM {partitions} WHERE id = ?),
u AS (UPDATE {processor} SET processed_seq = ?,
	attempts = CASE WHEN ? < (SELECT sequence FROM s) THEN 1 ELSE 0 END,
	last_error = NULL, next_attempt_at = NULL,
	locked_by = CASE WHEN ? < (SELECT sequence FROM s) THEN locked_by END,
	locked_until = CASE WHEN ? < (SELECT sequence FROM s) THEN now() + ? * interval '1 microsecond' END
	WHERE partition_id = ? AND locked_by = ?
	RETURNING processed_seq, attempts, locked_by IS NOT NULL AS leased),
v AS (UPDATE {vacuum_counter} SET counter = counter + ? WHERE partition_id = ? AND ? > 0 AND EXISTS (SELECT 1 FROM u) RETURNING 1)
SELECT u.processed_seq, u.attempts, u.leased, m.seq, m.body_id, m.payload_type, m.payload, m.headers, m.created_at
FROM u LEFT JOIN LATERAL (SELECT o.seq, o.body_id, b.payload_type, b.payload, b.headers, b.created_at
	FROM {outgoing} o JOIN {body} b ON b.id = o.body_id
	WHERE o.partition_id = ? AND o.seq > u.processed_seq AND u.leased ORDER BY o.seq LIMIT ?) m ON true
ORDER BY m.seq`

type leaseRow struct {
	Leased       *bool      `bun:"leased"` // ackLeaseSQL only
	ProcessedSeq int64      `bun:"processed_seq"`
	Attempts     int        `bun:"attempts"`
	Seq          *int64     `bun:"seq"`
	BodyID       []byte     `bun:"body_id"`
	PayloadType  *string    `bun:"payload_type"`
	Payload      []byte     `bun:"payload"`
	Headers      *string    `bun:"headers"`
	CreatedAt    *time.Time `bun:"created_at"`
}

// ProcessorLease takes the lease and reads the batch in one statement.
func (d *Dialect) ProcessorLease(ctx context.Context, p *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	var rows []leaseRow
	if err := d.Raw(d.DB(), d.q.leaseBatch, p.Owner, p.Duration.Microseconds(), p.PartitionID, p.PartitionID,
		p.PartitionID, p.Limit).Scan(ctx, &rows); err != nil {
		return dialect.ProcessorLeaseResult{}, d.Wrap(err)
	}
	if len(rows) == 0 {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return leaseResult(rows), nil
}

// ProcessorAckLease acks a clean advance and re-leases in one statement;
// anything else (failures, dead letters) takes the portable transaction.
func (d *Dialect) ProcessorAckLease(ctx context.Context, ack *dialect.ProcessorUpdateParams, next *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	if ack.Owner == "" || ack.Owner != next.Owner || ack.PartitionID != next.PartitionID || ack.Attempts != 0 ||
		ack.LastError != "" || ack.RetryAfter != 0 || len(ack.DeadLetters) > 0 {
		return d.Core.ProcessorAckLease(ctx, ack, next)
	}
	seq, pid := ack.ProcessedSeq, ack.PartitionID
	var rows []leaseRow
	if err := d.Raw(d.DB(), d.q.ackLease, pid, seq, seq, seq, seq, next.Duration.Microseconds(), pid, ack.Owner,
		ack.Acked, pid, ack.Acked, pid, next.Limit).Scan(ctx, &rows); err != nil {
		return dialect.ProcessorLeaseResult{}, d.Wrap(err)
	}
	if len(rows) == 0 {
		return dialect.ProcessorLeaseResult{}, dialect.ErrLeaseLost
	}
	if rows[0].Leased == nil || !*rows[0].Leased {
		return dialect.ProcessorLeaseResult{}, nil
	}
	return leaseResult(rows), nil
}

// leaseResult converts the rows of a lease statement.
func leaseResult(rows []leaseRow) dialect.ProcessorLeaseResult {
	res := dialect.ProcessorLeaseResult{Leased: true,
		State: dialect.ProcessorState{ProcessedSeq: rows[0].ProcessedSeq, Attempts: rows[0].Attempts - 1}}
	for _, r := range rows {
		if r.Seq == nil {
			continue
		}
		m := dialect.OutgoingMessage{Seq: *r.Seq, PayloadType: *r.PayloadType, Payload: r.Payload, CreatedAt: *r.CreatedAt}
		copy(m.ID[:], r.BodyID)
		if r.Headers != nil {
			m.Headers = []byte(*r.Headers)
		}
		res.Messages = append(res.Messages, m)
	}
	return res
}

// ProcessorAck records an outcome in one statement; with dead letters to
// insert it takes the portable transaction.
func (d *Dialect) ProcessorAck(ctx context.Context, p *dialect.ProcessorUpdateParams) error {
	if len(p.DeadLetters) > 0 || p.Owner == "" {
		return d.Core.ProcessorAck(ctx, p)
	}
	var lastErr any
	if p.LastError != "" {
		lastErr = p.LastError
	}
	retry := p.RetryAfter.Microseconds()
	var updated, bumped int64
	if err := d.Raw(d.DB(), d.q.ack, p.ProcessedSeq, p.Attempts, lastErr, retry, retry,
		p.PartitionID, p.Owner, p.Acked, p.PartitionID, p.Acked).Scan(ctx, &updated, &bumped); err != nil {
		return d.Wrap(err)
	}
	if updated == 0 {
		return dialect.ErrLeaseLost
	}
	return nil
}

// sequenceMoveSQL moves one batch of a partition in one statement (one
// round trip instead of seven). Its shape follows what was measured on a
// 200k-row backlog: sel filters on the constant partition id, del deletes by
// id = ANY(ARRAY(…)) (index lookups; a join here is planned as a scan of
// incoming), and rows are numbered by id because DELETE … RETURNING has no
// order. All CTEs share one snapshot, so the base seq comes from the
// UPDATE's own RETURNING. An empty batch writes nothing. Used for moves
// that follow a full one: it drains a backlog faster (measured 74k vs 64k
// msgs/s), while planning it costs more than it saves on small moves.
const sequenceMoveSQL = `WITH p AS (SELECT id FROM {partitions} WHERE id = ? FOR NO KEY UPDATE SKIP LOCKED),
sel AS (SELECT id FROM {incoming} WHERE partition_id = ? AND EXISTS (SELECT 1 FROM p) ORDER BY id LIMIT ?),
del AS (DELETE FROM {incoming} WHERE id = ANY(ARRAY(SELECT id FROM sel)) RETURNING id, body_id),
num AS (SELECT body_id, row_number() OVER (ORDER BY id) AS rn FROM del),
cnt AS (SELECT count(*) AS n FROM num),
upd AS (UPDATE {partitions} u SET sequence = u.sequence + cnt.n FROM cnt WHERE u.id = ? AND cnt.n > 0
	RETURNING u.sequence - cnt.n AS base),
ins AS (INSERT INTO {outgoing} (partition_id, seq, body_id) SELECT ?, upd.base + num.rn, num.body_id FROM num CROSS JOIN upd RETURNING 1)
SELECT (SELECT count(*) FROM p) AS locked, (SELECT count(*) FROM ins) AS moved,
	COALESCE((SELECT base FROM upd), 0) AS base`

// SequenceMove moves one batch in a single statement; see sequenceMoveSQL.
func (d *Dialect) SequenceMove(ctx context.Context, p *dialect.SequenceMoveParams) (dialect.SequenceMoveResult, error) {
	if !p.Backlog {
		// Small moves are cheaper as several simple statements: planning the
		// CTE costs more database CPU than the round trips it saves
		// (measured end to end on a 2-core host: 11.6k vs 15.3k msgs/s).
		return d.Core.SequenceMove(ctx, p)
	}
	var locked, moved, base int64
	err := d.Raw(d.DB(), d.q.sequenceMove, p.PartitionID, p.PartitionID, p.Limit, p.PartitionID, p.PartitionID).
		Scan(ctx, &locked, &moved, &base)
	if err != nil {
		return dialect.SequenceMoveResult{}, d.Wrap(err)
	}
	if locked == 0 {
		return dialect.SequenceMoveResult{Skipped: true}, nil
	}
	if moved == 0 {
		return dialect.SequenceMoveResult{}, nil
	}
	return dialect.SequenceMoveResult{Moved: int(moved), FirstSeq: base + 1, LastSeq: base + moved}, nil
}

// cteInsertMaxRows is the largest chunk written as one statement. Measured
// per message on 2 cores (4 producers, write path only): the CTE wins at 1
// and 10 rows per transaction (it saves a round trip: 45-46k vs 43k
// msgs/s at 10), ties at 30, and loses at 100 (93k vs 98-120k msgs/s), where
// the two plain INSERTs cost the server less per row.
const cteInsertMaxRows = 49

// MessageInsertMany writes body and incoming rows: small chunks in one
// statement, larger ones as two.
func (d *Dialect) MessageInsertMany(ctx context.Context, conn bun.IConn, p *dialect.MessageInsertManyParams) error {
	if len(p.Rows) == 0 {
		return nil
	}
	if len(p.Rows) > cteInsertMaxRows {
		return d.Core.MessageInsertMany(ctx, conn, p)
	}
	_, err := d.Raw(conn, d.q.insertMessages, sqlcore.BodyValues(d.Flavor(), p.Rows), sqlcore.IncomingValues(p.Rows)).Exec(ctx)
	return d.Wrap(err)
}

// VacuumDelete deletes a seq range of outgoing rows and their bodies in one
// statement, planned with nested loops only: the planner otherwise joins
// the deleted ids to body by hashing a sequential scan of the whole body
// table, backlog and dead rows included (measured on a 200k-row body: 68-120
// ms per 3,000-row chunk with the hash join, 17 ms with primary-key probes).
func (d *Dialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	var n int64
	err := d.runWithSettings(ctx, "set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)", func(ctx context.Context, tx bun.Tx) error {
		res, err := d.Raw(tx, d.q.vacuumDelete, p.PartitionID, p.FromSeq, p.ToSeq).Exec(ctx)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), d.Wrap(err)
}

// PartitionStats runs with JIT off: the planner, with no statistics on the
// tiny partitions table, assumes thousands of rows and JIT-compiles the
// per-partition subqueries (measured 25-250 ms of compilation per call,
// for a query that runs in a few milliseconds).
func (d *Dialect) PartitionStats(ctx context.Context) ([]dialect.PartitionStats, error) {
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
func (d *Dialect) runWithSettings(ctx context.Context, settings string, fn func(ctx context.Context, tx bun.Tx) error) error {
	return d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Raw(tx, "SELECT "+settings).Exec(ctx); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

type flavor struct{}

func (flavor) Name() dialect.Name             { return dialect.Postgres }
func (flavor) Features() dialect.Feature      { return dialect.RowLocks }
func (flavor) Now() string                    { return "now()" }
func (flavor) NowPlus() string                { return "(now() + ? * interval '1 microsecond')" }
func (flavor) NowPlusArg(d time.Duration) any { return d.Microseconds() }

// FOR NO KEY UPDATE does not conflict with the KEY SHARE a foreign key would
// take, and is all a non-key UPDATE needs.
func (flavor) PartitionLock() string { return " FOR NO KEY UPDATE SKIP LOCKED" }
func (flavor) RowLock() string       { return " FOR NO KEY UPDATE SKIP LOCKED" }

// SequencerReadSetup turns bitmap scans off for the rest of the move's
// transaction (set_config with is_local, evaluated with the lock, costs no
// round trip). The planner estimates fewer rows per partition than the
// batch limit and picks a bitmap heap scan plus sort, which visits every
// deleted-but-not-vacuumed row of the partition on each move; a plain index
// scan marks those index entries dead once and skips them afterwards
// (measured on 190k dead rows: 1,717 → 134 buffers, 1.8 → 0.2 ms; under
// load 4.5 ms per read before).
func (flavor) SequencerReadSetup() string {
	return " AND set_config('enable_bitmapscan', 'off', true) = 'off'"
}
func (flavor) InsertIgnore() string      { return "INSERT" }
func (flavor) InsertIgnoreTail() string  { return "ON CONFLICT DO NOTHING" }
func (flavor) TxOptions() *sql.TxOptions { return nil }
func (flavor) BeginWrite() string        { return "" }

// IsRetryable recognises serialization failures and deadlocks from any
// driver without importing one: pgx and lib/pq expose SQLState(), pgdriver
// exposes Field('C').
func (flavor) IsRetryable(err error) bool {
	var state string
	var withState interface{ SQLState() string }
	var withField interface{ Field(byte) string }
	switch {
	case errors.As(err, &withState):
		state = withState.SQLState()
	case errors.As(err, &withField):
		state = withField.Field('C')
	default:
		return false
	}
	return state == "40001" || state == "40P01" || state == "55P03"
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

// DeleteIncoming joins the ids, one array value, to incoming: a nested loop
// of primary-key lookups whatever the planner settings. "id IN (…1000
// literals…)" took 1 ms to plan, and became a sequential scan (16 ms) in
// the move's transaction, where bitmap scans are off.
func (flavor) DeleteIncoming() string {
	return "DELETE FROM {incoming} i USING unnest(CAST(? AS bigint[])) u(id) WHERE i.id = u.id"
}
func (flavor) IDList(ids []int64) any { return sqlcore.IDArray(ids, '{', '}') }
