// Package dialecttest is the per-operation suite of seqbox's dialects, in
// the shape of River's riverdrivertest: [Run] takes a way to open a
// dialect and calls every operation of [dialect.Dialect] directly (and the
// optional ones the engine and the vacuum find by type assertion, when the
// dialect has them), one t.Run per operation with its edge cases as
// sub-cases. It checks what each call returns and what it leaves in the
// tables, read back with plain SQL: empty input, mixed parameters in
// grouped calls, rows locked by another transaction, a held snapshot,
// another process on the same tables.
//
// It uses nothing of a dialect but its interface and its tables, so it
// holds for any implementation of them. The pipeline behaviour is
// internal/conformance's; this suite pins each statement's contract.
package dialecttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// Open returns a dialect on the test database for tables named
// prefix+name. It creates no table: the suite migrates and drops them.
// Called again with the same prefix it returns another handle on the same
// tables, as another process would have (the multi-process cases).
type Open func(t *testing.T, prefix string) dialect.Dialect

// Run runs every operation's cases on the dialects open returns, each
// operation on tables of its own.
func Run(t *testing.T, open Open) {
	t.Run("Base", func(t *testing.T) { testBase(t, open) })
	t.Run("Schema", func(t *testing.T) { testSchema(t, open) })
	t.Run("QueueRegister", func(t *testing.T) { testQueueRegister(t, open) })
	t.Run("PartitionList", func(t *testing.T) { testPartitionList(t, open) })
	t.Run("MessageInsertMany", func(t *testing.T) { testMessageInsertMany(t, open) })
	t.Run("MessagePendingList", func(t *testing.T) { testMessagePendingList(t, open) })
	t.Run("DedupClaim", func(t *testing.T) { testDedupClaim(t, open) })
	t.Run("DedupExpire", func(t *testing.T) { testDedupExpire(t, open) })
	t.Run("IncomingPartitionList", func(t *testing.T) { testIncomingPartitionList(t, open) })
	t.Run("SequenceMove", func(t *testing.T) { testSequenceMove(t, open) })
	t.Run("SequenceMoveMany", func(t *testing.T) { testSequenceMoveMany(t, open) })
	t.Run("ProcessorReadyList", func(t *testing.T) { testProcessorReadyList(t, open) })
	t.Run("ProcessorLease", func(t *testing.T) { testProcessorLease(t, open) })
	t.Run("ProcessorAck", func(t *testing.T) { testProcessorAck(t, open) })
	t.Run("ProcessorAckLease", func(t *testing.T) { testProcessorAckLease(t, open) })
	t.Run("ProcessorLeaseGroup", func(t *testing.T) { testProcessorLeaseGroup(t, open) })
	t.Run("ProcessorAckLeaseGroup", func(t *testing.T) { testProcessorAckLeaseGroup(t, open) })
	t.Run("ProcessorLock", func(t *testing.T) { testProcessorLock(t, open) })
	t.Run("OutgoingList", func(t *testing.T) { testOutgoingList(t, open) })
	t.Run("ProcessorUpdate", func(t *testing.T) { testProcessorUpdate(t, open) })
	t.Run("PreparedHotPath", func(t *testing.T) { testPreparedHotPath(t, open) })
	t.Run("PurgePartition", func(t *testing.T) { testPurgePartition(t, open) })
	t.Run("VacuumCounterList", func(t *testing.T) { testVacuumCounterList(t, open) })
	t.Run("VacuumDelete", func(t *testing.T) { testVacuumDelete(t, open) })
	t.Run("TableVacuum", func(t *testing.T) { testTableVacuum(t, open) })
	t.Run("TableRotate", func(t *testing.T) { testTableRotate(t, open) })
	t.Run("PartitionStats", func(t *testing.T) { testPartitionStats(t, open) })
	t.Run("DeadLetters", func(t *testing.T) { testDeadLetters(t, open) })
	t.Run("ProcessorFailingList", func(t *testing.T) { testProcessorFailingList(t, open) })
	t.Run("ProcessorAdminRead", func(t *testing.T) { testProcessorAdminRead(t, open) })
	t.Run("HeldSnapshot", func(t *testing.T) { testHeldSnapshot(t, open) })
	t.Run("MultiProcess", func(t *testing.T) { testMultiProcess(t, open) })
	t.Run("Wakeups", func(t *testing.T) { testWakeups(t, open) })
}

// env is one operation's tables and the dialect on them.
type env struct {
	t      *testing.T
	ctx    context.Context
	open   Open
	prefix string
	d      dialect.Dialect
	db     *bun.DB
	tb     dialect.Tables
	queues *int // queues registered so far, shared by sub-tests
}

// newEnv opens a dialect on a fresh prefix, migrates it, and drops the
// tables when t ends (unless SEQBOX_KEEP_TABLES is set).
func newEnv(t *testing.T, open Open) *env {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	t.Cleanup(cancel)
	prefix := freshPrefix()
	d := open(t, prefix)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	t.Cleanup(func() {
		_ = d.Release()
		if os.Getenv("SEQBOX_KEEP_TABLES") == "" {
			_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
		}
	})
	return &env{t: t, ctx: ctx, open: open, prefix: prefix, d: d, db: d.DB(), tb: d.Tables(), queues: new(int)}
}

// freshPrefix is a table prefix no other test uses.
func freshPrefix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "sbo" + hex.EncodeToString(b[:]) + "_"
}

// with returns e for a sub-test: its t, the same tables.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// other is another handle on the same tables, as another process has.
func (e *env) other() dialect.Dialect {
	d := e.open(e.t, e.prefix)
	e.t.Cleanup(func() { _ = d.Release() })
	return d
}

func (e *env) multiProcess() bool { return e.d.Features().Has(dialect.MultiProcess) }

// needRowLocks skips a case that holds a row lock in one transaction while
// the dialect works in another: a single-writer database has no row locks.
func (e *env) needRowLocks() {
	e.t.Helper()
	if !e.multiProcess() {
		e.t.Skipf("%s has one writer and no row locks: another transaction cannot hold a row while the dialect works", e.d.Name())
	}
}

// queue registers a queue of n partitions with a name unique in e's tables.
func (e *env) queue(n int) []int64 {
	e.t.Helper()
	*e.queues++
	name := fmt.Sprintf("q%d", *e.queues)
	ids, err := e.d.QueueRegister(e.ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: name, Partitions: n}}})
	require.NoError(e.t, err)
	require.Len(e.t, ids, 1)
	require.Len(e.t, ids[0], n)
	return ids[0]
}

func (e *env) queueName(pid int64) string {
	e.t.Helper()
	var q string
	require.NoError(e.t, e.db.NewRaw("SELECT queue FROM ? WHERE id = ?", bun.Ident(e.tb.Partitions), pid).Scan(e.ctx, &q))
	return q
}

// newIDs returns n fresh message ids.
func newIDs(n int) []dialect.MessageID {
	raw := make([][16]byte, n)
	if err := uuidv7.Fill(raw, time.Now()); err != nil {
		panic(err)
	}
	out := make([]dialect.MessageID, n)
	for i := range raw {
		out[i] = raw[i]
	}
	return out
}

// rows builds n messages for pid: payload "p<i>", type "t", no key or headers.
func rows(pid int64, n int) []dialect.MessageRow {
	ids := newIDs(n)
	out := make([]dialect.MessageRow, n)
	for i := range out {
		out[i] = dialect.MessageRow{ID: ids[i], PartitionID: pid, PayloadType: "t", Payload: fmt.Appendf(nil, "p%d", i)}
	}
	return out
}

// insert writes rs on the database in one call.
func (e *env) insert(rs []dialect.MessageRow) {
	e.t.Helper()
	require.NoError(e.t, e.d.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rs, ChunkRows: 100, ChunkBytes: 1 << 20}))
}

// enqueue writes n messages for pid and returns their ids.
func (e *env) enqueue(pid int64, n int) []dialect.MessageID {
	e.t.Helper()
	rs := rows(pid, n)
	e.insert(rs)
	return idsOf(rs)
}

func idsOf(rs []dialect.MessageRow) []dialect.MessageID {
	out := make([]dialect.MessageID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// sequenced enqueues n messages for each pid and moves them all.
func (e *env) sequenced(n int, pids ...int64) map[int64][]dialect.MessageID {
	e.t.Helper()
	out := map[int64][]dialect.MessageID{}
	for _, pid := range pids {
		out[pid] = e.enqueue(pid, n)
	}
	e.moveAll(pids...)
	return out
}

// moveAll moves every incoming row of pids.
func (e *env) moveAll(pids ...int64) {
	e.t.Helper()
	for _, pid := range pids {
		res, err := e.d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10_000})
		require.NoError(e.t, err)
		require.False(e.t, res.Skipped)
	}
}

// procRow is a processor row as stored.
type procRow struct {
	ProcessedSeq  int64      `bun:"processed_seq"`
	Attempts      int        `bun:"attempts"`
	LastError     *string    `bun:"last_error"`
	NextAttemptAt *time.Time `bun:"next_attempt_at"`
	LockedBy      *string    `bun:"locked_by"`
	LockedUntil   *time.Time `bun:"locked_until"`
	LeaseLimit    *int       `bun:"lease_limit"`
	ParkedAt      *time.Time `bun:"parked_at"`
}

func (r procRow) owner() string {
	if r.LockedBy == nil {
		return ""
	}
	return *r.LockedBy
}

func (r procRow) lastError() string {
	if r.LastError == nil {
		return ""
	}
	return *r.LastError
}

func (e *env) proc(pid int64) procRow {
	e.t.Helper()
	var r []procRow
	require.NoError(e.t, e.db.NewRaw("SELECT processed_seq, attempts, last_error, next_attempt_at, locked_by, locked_until, lease_limit, parked_at FROM ? WHERE partition_id = ?",
		bun.Ident(e.tb.Processor), pid).Scan(e.ctx, &r))
	require.Len(e.t, r, 1, "processor row of partition %d", pid)
	return r[0]
}

// sequence is the partition's last allocated seq: its last outgoing row,
// or its cursor when the vacuum has pruned them all (no row keeps it).
func (e *env) sequence(pid int64) int64 {
	e.t.Helper()
	var top int64
	require.NoError(e.t, e.db.NewRaw("SELECT COALESCE(MAX(seq), 0) FROM ? WHERE partition_id = ?", bun.Ident(e.tb.Outgoing), pid).Scan(e.ctx, &top))
	return max(top, e.proc(pid).ProcessedSeq)
}

// outgoing lists a partition's outgoing rows: seq → body id.
func (e *env) outgoing(pid int64) []outRow {
	e.t.Helper()
	var out []outRow
	require.NoError(e.t, e.db.NewRaw("SELECT seq, body_id, purged FROM ? WHERE partition_id = ? ORDER BY seq",
		bun.Ident(e.tb.Outgoing), pid).Scan(e.ctx, &out))
	return out
}

type outRow struct {
	Seq    int64  `bun:"seq"`
	BodyID []byte `bun:"body_id"`
	Purged int    `bun:"purged"`
}

// outgoingIDs is a partition's outgoing message ids in seq order, and
// checks the seqs run 1.. without a gap from the first.
func (e *env) outgoingIDs(pid int64) []dialect.MessageID {
	e.t.Helper()
	rs := e.outgoing(pid)
	out := make([]dialect.MessageID, len(rs))
	for i, r := range rs {
		if i > 0 {
			require.Equal(e.t, rs[i-1].Seq+1, r.Seq, "seqs of partition %d are gap-free", pid)
		}
		copy(out[i][:], r.BodyID)
	}
	return out
}

// count counts the rows of a table that match where ("" for all).
func (e *env) count(table, where string, args ...any) int {
	e.t.Helper()
	q := "SELECT COUNT(*) FROM ?"
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	require.NoError(e.t, e.db.NewRaw(q, append([]any{bun.Ident(table)}, args...)...).Scan(e.ctx, &n))
	return n
}

// incomingRows is the WHERE clause that counts messages in incoming:
// dbtest.IncomingRows, which this package, linking no driver, cannot
// import.
const incomingRows = "id > 0"

// incoming counts a partition's incoming rows.
func (e *env) incoming(pid int64) int {
	return e.count(e.tb.Incoming, "partition_id = ? AND "+incomingRows, pid)
}

// dump renders every row of every table, for the cases that must write
// nothing.
func (e *env) dump() string {
	e.t.Helper()
	var b strings.Builder
	for _, table := range e.tb.All() {
		lines := e.tableRows(table)
		slices.Sort(lines)
		fmt.Fprintf(&b, "%s (%d rows)\n  %s\n", table, len(lines), strings.Join(lines, "\n  "))
	}
	return b.String()
}

// tableRows renders every row of table, in no order.
func (e *env) tableRows(table string) []string {
	e.t.Helper()
	rs, err := e.db.QueryContext(e.ctx, "SELECT * FROM "+table)
	require.NoError(e.t, err)
	defer func() { _ = rs.Close() }()
	cols, err := rs.Columns()
	require.NoError(e.t, err)
	var lines []string
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(e.t, rs.Scan(ptrs...))
		var l strings.Builder
		for i, c := range cols {
			fmt.Fprintf(&l, "%s=%v ", c, vals[i])
		}
		lines = append(lines, l.String())
	}
	require.NoError(e.t, rs.Err())
	return lines
}

// unchanged runs fn and checks it wrote nothing.
func (e *env) unchanged(what string, fn func()) {
	e.t.Helper()
	before := e.dump()
	fn()
	require.Equal(e.t, before, e.dump(), "%s wrote to the tables", what)
}

// now reads the database clock as the dialect's statements do.
func (e *env) now() time.Time {
	e.t.Helper()
	var s string
	switch e.d.Name() {
	case dialect.Postgres:
		var t time.Time
		require.NoError(e.t, e.db.NewRaw("SELECT clock_timestamp()").Scan(e.ctx, &t))
		return t.UTC()
	case dialect.MySQL:
		var t time.Time
		require.NoError(e.t, e.db.NewRaw("SELECT UTC_TIMESTAMP(6)").Scan(e.ctx, &t))
		return t.UTC()
	default:
		require.NoError(e.t, e.db.NewRaw("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").Scan(e.ctx, &s))
		t, err := time.Parse("2006-01-02 15:04:05.000", s)
		require.NoError(e.t, err)
		return t
	}
}

// past is a time every database compares as long gone.
const past = "2000-01-01 00:00:00"

// expireLease makes a partition's lease expired by the database clock,
// as time would: the owner stays recorded.
func (e *env) expireLease(pid int64) {
	e.t.Helper()
	_, err := e.db.NewRaw("UPDATE ? SET locked_until = ? WHERE partition_id = ?", bun.Ident(e.tb.Processor), past, pid).Exec(e.ctx)
	require.NoError(e.t, err)
}

// retryDue makes a partition's pending retry due now.
func (e *env) retryDue(pid int64) {
	e.t.Helper()
	_, err := e.db.NewRaw("UPDATE ? SET next_attempt_at = ? WHERE partition_id = ?", bun.Ident(e.tb.Processor), past, pid).Exec(e.ctx)
	require.NoError(e.t, err)
}

// leaseEnds checks a lease runs for d from a database time between from
// and to (read around the call), give or take a second of the clock's
// precision on each database.
func (e *env) leaseEnds(pid int64, d time.Duration, from, to time.Time, what string) {
	e.t.Helper()
	r := e.proc(pid)
	require.NotNil(e.t, r.LockedUntil, "%s: partition %d has no lease", what, pid)
	until := r.LockedUntil.UTC()
	lo, hi := from.Add(d-time.Second), to.Add(d+time.Second)
	if until.Before(lo) || until.After(hi) {
		e.t.Fatalf("%s: partition %d asked for a %v lease and got one ending %v after the database clock at the call",
			what, pid, d, until.Sub(from))
	}
}

// holdRow locks one row of table (column = value) in a transaction of its
// own until the returned release, which rolls back unless commit is set.
func (e *env) holdRow(table, column string, value any) (tx bun.Tx, release func(commit bool)) {
	e.t.Helper()
	tx, err := e.db.BeginTx(e.ctx, nil)
	require.NoError(e.t, err)
	var n []int64
	require.NoError(e.t, tx.NewRaw("SELECT 1 FROM ? WHERE ? = ? FOR UPDATE", bun.Ident(table), bun.Ident(column), value).Scan(e.ctx, &n))
	require.Len(e.t, n, 1)
	done := false
	release = func(commit bool) {
		if done {
			return
		}
		done = true
		if commit {
			require.NoError(e.t, tx.Commit())
		} else {
			_ = tx.Rollback()
		}
	}
	e.t.Cleanup(func() { release(false) })
	return tx, release
}

// lease leases a partition for owner with a 5-minute lease.
func (e *env) lease(pid int64, owner string, limit int) dialect.ProcessorLeaseResult {
	e.t.Helper()
	res, err := e.d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: 5 * time.Minute, Limit: limit})
	require.NoError(e.t, err)
	return res
}

func seqsOf(ms []dialect.OutgoingMessage) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func msgIDs(ms []dialect.OutgoingMessage) []dialect.MessageID {
	out := make([]dialect.MessageID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
