package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/rotatetest"
)

// TestMoveReadsOnlyTheHead: a move's read of incoming visits the head of
// the partition, as many rows as it takes, whatever the backlog behind it
// and whatever the statistics say. A sort key the index cannot provide
// (once, ORDER BY resolved "xid" to the output column, a bigint cast) reads
// the partition's whole backlog on every move, so a drain's cost per
// message grows with the backlog (docs/ARCHITECTURE.md, "Plans that do not
// depend on statistics").
func TestMoveReadsOnlyTheHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d := migratedPostgres(t)

	const backlog, limit = 5000, 10
	incoming := bun.Ident(d.Tables().Incoming)
	for _, pid := range []int64{1, 2} {
		_, err := db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id)
SELECT ?, decode(lpad(to_hex(g), 32, '0'), 'hex') FROM generate_series(1, ?) g`, incoming, pid, backlog)
		require.NoError(t, err)
	}
	queries, err := postgres.RenderMoveReads(d, db, []int64{1, 2}, limit)
	require.NoError(t, err)
	// Without statistics (autovacuum off, a new table) and with them.
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := db.ExecContext(ctx, `ANALYZE ?`, incoming)
			require.NoError(t, err)
		}
		for name, query := range queries {
			read := rowsRead(t, db, query, d.Tables().Incoming)
			require.LessOrEqualf(t, read, 2*2*limit, "%s (analyzed %v) read %d rows of incoming for a head of %d per partition:\n%s",
				name, analyzed, read, limit, query)
		}
	}
}

// TestReconcileProbesEachPartition: the reconciler's list of partitions
// with rows to move reads one incoming row per partition that has any,
// whatever the statistics. The planner turned an EXISTS into a hash
// semi-join over every row of incoming, dead ones included, once a second:
// here with statistics of 4,096 partitions; in a held-snapshot benchmark of
// 16 partitions without statistics, each call walked every row moved since
// the snapshot began (docs/ARCHITECTURE.md, "Plans that do not depend on
// statistics").
func TestReconcileProbesEachPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d := migratedPostgres(t)

	const partitions, backlog = 4096, 5000
	_, err := db.ExecContext(ctx, `INSERT INTO ? (id, queue, partition_no) SELECT g, 'q', g FROM generate_series(1, ?) g`,
		bun.Ident(d.Tables().Partitions), partitions)
	require.NoError(t, err)
	incoming := bun.Ident(d.Tables().Incoming)
	for _, pid := range []int64{1, 2} {
		_, err := db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id)
SELECT ?, decode(lpad(to_hex(g), 32, '0'), 'hex') FROM generate_series(1, ?) g`, incoming, pid, backlog)
		require.NoError(t, err)
	}
	// Moves replace their partitions' bounds: a table of dead rows that,
	// without statistics, the planner believes holds many partitions.
	for range 4 {
		_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, xid) SELECT id, '0' FROM ?`,
			bun.Ident(d.Tables().Partitions+"_bound"), bun.Ident(d.Tables().Partitions))
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `DELETE FROM ?`, bun.Ident(d.Tables().Partitions+"_bound"))
		require.NoError(t, err)
	}
	// Rows moved and not yet vacuumed: a table that has grown.
	_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id)
SELECT 3, decode(lpad(to_hex(g), 32, '0'), 'hex') FROM generate_series(1, ?) g`, incoming, 20*backlog)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `DELETE FROM ? WHERE partition_id = 3`, incoming)
	require.NoError(t, err)
	query, err := postgres.RenderIncomingPartitions(d, db)
	require.NoError(t, err)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := db.ExecContext(ctx, `ANALYZE ?, ?`, incoming, bun.Ident(d.Tables().Partitions))
			require.NoError(t, err)
		}
		var ids []int64
		require.NoError(t, db.NewRaw(query).Scan(ctx, &ids))
		require.ElementsMatch(t, []int64{1, 2}, ids)
		read := rowsRead(t, db, query, d.Tables().Incoming)
		require.LessOrEqualf(t, read, 2, "analyzed %v: read %d rows of incoming to find 2 partitions with rows:\n%s", analyzed, read, query)
	}
}

// rowsRead runs query under EXPLAIN ANALYZE in a transaction set up as a
// move's (bitmap scans off) and returns the rows its scans of table
// produced, over all loops.
func rowsRead(t *testing.T, db *bun.DB, query, table string) int {
	t.Helper()
	var out []byte
	err := db.RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_bitmapscan = off`); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+query).Scan(&out)
	})
	require.NoError(t, err)
	return explained(t, out).rows(table)
}

// explained is the plan of one statement's EXPLAIN (FORMAT JSON) output.
func explained(t *testing.T, out []byte) planNode {
	t.Helper()
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	require.Len(t, plans, 1)
	return plans[0].Plan
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
	// With BUFFERS: pages read, from the cache or not.
	SharedHit  float64 `json:"Shared Hit Blocks"`
	SharedRead float64 `json:"Shared Read Blocks"`
}

// buffers is the pages that n and the nodes under it read of table.
func (n planNode) buffers(table string) int {
	total := 0
	if n.Relation == table {
		total += int(n.SharedHit + n.SharedRead)
	}
	for _, c := range n.Plans {
		total += c.buffers(table)
	}
	return total
}

// seqScans is the relations matching tables that n and the nodes under
// it scan sequentially.
func (n planNode) seqScans(tables *regexp.Regexp) []string {
	var out []string
	if n.NodeType == "Seq Scan" && tables.MatchString(n.Relation) {
		out = append(out, n.Relation)
	}
	for _, c := range n.Plans {
		out = append(out, c.seqScans(tables)...)
	}
	return out
}

func (n planNode) rows(table string) int {
	total := 0
	if n.Relation == table {
		total += int(n.Rows * n.Loops)
	}
	for _, c := range n.Plans {
		total += c.rows(table)
	}
	return total
}

// TestRotateCheckReadsOnlyTheHeads: the rotator's check of a generation
// reads, of its outgoing rows, only those above each partition's cursor
// (none, acked); of incoming, each partition's rows from its bound, never
// the rows moved before it, dead or not yet vacuumed, and from the xmin of
// its first check (as under its lock) only rows committed since. An
// EXISTS of incoming was a scan of all of it, and the outgoing probe's
// bare LIMIT a scan of the generation per partition: 0.5–2.5 s per check
// in an autovacuum-on soak, half of them under the lock that stops the
// pipeline. The list of a pinned generation's pending partitions
// (PendingCursors) reads by the same probes, each partition's.
func TestRotateCheckReadsOnlyTheHeads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d := migratedPostgres(t)

	const partitions, moved, backlog = 16, 200_000, 20
	incoming, parts := bun.Ident(d.Tables().Incoming), bun.Ident(d.Tables().Partitions)
	_, err := db.ExecContext(ctx, `INSERT INTO ? (id, queue, partition_no) SELECT g, 'q', g FROM generate_series(1, ?) g`, parts, partitions)
	require.NoError(t, err)
	fill := func(from, n int) {
		_, err := db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id, xid)
SELECT 1 + g % ?, decode(lpad(to_hex(g), 32, '0'), 'hex'), pg_current_xact_id() FROM generate_series(?, ?) g`,
			incoming, partitions, from, from+n-1)
		require.NoError(t, err)
	}
	// Rows moved: deleted, each partition's bound past them.
	fill(1, moved)
	_, err = db.ExecContext(ctx, `DELETE FROM ?`, incoming)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, xid) SELECT id, pg_current_xact_id() FROM ?`,
		bun.Ident(d.Tables().Partitions+"_bound"), parts)
	require.NoError(t, err)
	fill(moved+1, partitions*backlog) // the backlog, in generation 0
	// Generation 1's outgoing rows, every one acked.
	const acked = 5000
	outgoing := bun.Ident(d.Tables().Outgoing + "_g1")
	_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, seq, body_id, gen)
SELECT p, s, decode(lpad(to_hex(p * ? + s), 32, '0'), 'hex'), 1 FROM generate_series(1, ?) p, generate_series(1, ?) s`,
		outgoing, acked, partitions, acked)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, version, processed_seq) SELECT g, 0, ? FROM generate_series(1, ?) g`,
		bun.Ident(d.Tables().Processor), acked, partitions)
	require.NoError(t, err)

	all, err := postgres.RenderRotatePending(d, db, 1, 0)
	require.NoError(t, err)
	// The bound is a fresh xid, past every row above: the server's xmin
	// would do in a quiet cluster, but another test's open transaction
	// holds it below the backlog, and the check then rightly reads it.
	var xmin int64
	require.NoError(t, db.NewRaw(`SELECT (pg_current_xact_id()::text)::bigint`).Scan(ctx, &xmin))
	since, err := postgres.RenderRotatePending(d, db, 1, xmin)
	require.NoError(t, err)
	cursors, err := postgres.RenderRotatePendingCursors(d, db, 1)
	require.NoError(t, err)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := db.ExecContext(ctx, `ANALYZE ?, ?, ?`, incoming, parts, outgoing)
			require.NoError(t, err)
		}
		var pendingPartitions []struct {
			PartitionID  int64 `bun:"partition_id"`
			ProcessedSeq int64 `bun:"processed_seq"`
		}
		require.NoError(t, db.NewRaw(cursors).Scan(ctx, &pendingPartitions))
		require.Empty(t, pendingPartitions, "generation 1 holds nothing pending")
		for _, c := range []struct {
			query string
			most  int // pages: an index descent and the backlog's rows
		}{{all, partitions * (4 + backlog)}, {since, partitions * 4}, {cursors, partitions * (4 + backlog)}} {
			if c.query != cursors {
				var pending bool
				var at int64
				require.NoError(t, db.NewRaw(c.query).Scan(ctx, &pending, &at))
				require.False(t, pending, "every incoming row is in generation 0")
			}
			var out []byte
			require.NoError(t, db.QueryRowContext(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+c.query).Scan(&out))
			plan := explained(t, out)
			read := plan.buffers(d.Tables().Incoming)
			require.LessOrEqualf(t, read, c.most, "analyzed %v: the check read %d pages of incoming:\n%s", analyzed, read, out)
			read = plan.buffers(d.Tables().Outgoing + "_g1")
			require.LessOrEqualf(t, read, partitions*4, "analyzed %v: the check read %d pages of outgoing:\n%s", analyzed, read, out)
		}
	}
}

// migratedPostgres is a PostgreSQL dialect with a fresh schema of its own,
// dropped at cleanup (newRotating's, migrated).
func migratedPostgres(t *testing.T) (*bun.DB, dialect.Dialect) {
	t.Helper()
	db, d, _ := newRotating(t)
	require.NoError(t, d.SchemaMigrate(t.Context(), &dialect.SchemaMigrateParams{}))
	return db, d
}

// TestProcessorRowReadsStayFlat: under a held snapshot, every lease and
// ack leaves a version of the partition's processor row that cannot be
// pruned, and the statements that find the row read the same few entries
// of its primary key whatever their number: the current version is the
// top of the key (migration 015). Rewritten in place, each lookup walked
// every version since the snapshot began (a partition's ack and next
// lease went from 35 µs to 2.5 ms in 90 s), and with statistics of a
// one-page table (this VACUUM ANALYZE) the plans scanned the whole table
// instead. Not parallel: the snapshot it holds holds back every other
// transaction's xmin, which the rotation and move tests beside it read.
func TestProcessorRowReadsStayFlat(t *testing.T) {
	ctx := t.Context()
	db, d := migratedPostgres(t)
	pid := rotatetest.OneQueue(t, d)
	rotatetest.EnqueueAndMove(t, db, d, pid, dialect.MessageID{1})
	processor := d.Tables().Processor
	_, err := db.ExecContext(ctx, "VACUUM ANALYZE ?", bun.Ident(processor))
	require.NoError(t, err)

	held, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer func() { _ = held.Rollback() }()
	var one int
	require.NoError(t, held.QueryRowContext(ctx, "SELECT 1").Scan(&one)) // takes the snapshot

	const versions = 300
	for range versions / 2 {
		lease, err := d.ProcessorLease(ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "o", Duration: time.Minute, Limit: 1})
		require.NoError(t, err)
		require.True(t, lease.Leased)
		// A failed attempt: the message stays at the head, the next lease
		// takes it again.
		require.NoError(t, d.ProcessorAck(ctx, &dialect.ProcessorUpdateParams{PartitionID: pid, Owner: "o", Attempts: 1, LastError: "again"}))
	}
	// The setup is what the statements must withstand: a lookup of the
	// row by partition alone reads an entry per version.
	naive, _ := keyEntriesRead(t, db, fmt.Sprintf("SELECT * FROM %s WHERE partition_id = %d", processor, pid), processor)
	require.GreaterOrEqual(t, naive, versions, "the held snapshot keeps the versions")

	queries, err := postgres.RenderProcessorStatements(d, db, pid)
	require.NoError(t, err)
	for name, query := range queries {
		read, seq := keyEntriesRead(t, db, query, processor)
		require.Falsef(t, seq, "%s scans the processor table:\n%s", name, query)
		require.LessOrEqualf(t, read, 8, "%s read %d entries of the processor's key (a lookup by partition alone: %d):\n%s", name, read, naive, query)
	}
}

// keyEntriesRead runs query under EXPLAIN ANALYZE in a transaction it
// rolls back, and returns how many entries of table's primary key it
// read (the transaction's own statistics, which count the entries of dead
// rows too) and whether it scanned the table sequentially.
func keyEntriesRead(t *testing.T, db *bun.DB, query, table string) (int, bool) {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	entries := func() int {
		var n int
		require.NoError(t, tx.QueryRowContext(ctx, "SELECT pg_stat_get_xact_tuples_returned(to_regclass(?))", table+"_pkey").Scan(&n))
		return n
	}
	before := entries()
	var out []byte
	require.NoError(t, tx.QueryRowContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+query).Scan(&out), query)
	return entries() - before, len(explained(t, out).seqScans(regexp.MustCompile("^"+regexp.QuoteMeta(table)+"$"))) > 0
}
