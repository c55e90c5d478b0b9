package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// testStatementsReleasedOnStop: an outbox that stops closes the statements
// its dialect prepared. Each Start makes a dialect of its own, so a process
// that started and stopped outboxes used to keep every earlier one's
// statements open on its pooled connections (and on the server) for as
// long as the connections lived.
func testStatementsReleasedOnStop(e *Env) {
	if !e.D.Features().Has(dialect.MultiProcess) {
		e.T.Skipf("%s prepares statements in the process, not on a server: nothing there to count", e.D.Name())
	}
	before := e.liveStatements()
	globalBefore := e.globalPreparedStatements()
	const cycles = 5
	for i := range cycles {
		ob, err := e.Builder().Queue("stmts", 2, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).Start(e.Ctx)
		require.NoError(e.T, err)
		var ids []outbox.MessageID
		for part := range 2 {
			id, err := ob.Enqueue(e.Ctx, e.DB, "stmts", outbox.Message{Partition: part, PayloadType: "t"})
			require.NoError(e.T, err)
			ids = append(ids, id)
		}
		require.NoError(e.T, ob.WaitProcessed(e.Ctx, ids...), "cycle %d", i)
		require.NoError(e.T, ob.Stop(e.Ctx), "cycle %d", i)
	}
	after := e.liveStatements()
	e.T.Logf("statements open on this pool's connections: %d before %d starts and stops, %d after (server-wide Prepared_stmt_count: %s before, %s after)",
		before, cycles, after, globalBefore, e.globalPreparedStatements())
	require.Equal(e.T, before, after, "statements left open on the pool's connections after %d starts and stops", cycles)
}

// liveStatements counts the prepared statements open on every connection
// of the test's pool, each read on its own session: the server-wide count
// (MariaDB's Prepared_stmt_count) also counts every other client of a
// shared server. The pool must be idle.
func (e *Env) liveStatements() int {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	// Holding as many connections as are open takes every idle one.
	var conns []bun.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range e.DB.Stats().OpenConnections {
		c, err := e.DB.Conn(ctx)
		require.NoError(e.T, err)
		conns = append(conns, c)
	}
	total := 0
	for _, c := range conns {
		switch e.D.Name() {
		case dialect.Postgres:
			var n int
			require.NoError(e.T, c.NewRaw("SELECT count(*) FROM pg_prepared_statements").Scan(ctx, &n))
			total += n
		case dialect.MySQL:
			var rows []struct {
				Name  string `bun:"Variable_name"`
				Value int    `bun:"Value"`
			}
			require.NoError(e.T, c.NewRaw("SHOW SESSION STATUS WHERE variable_name IN ('Com_stmt_prepare', 'Com_stmt_close')").Scan(ctx, &rows))
			for _, r := range rows {
				if strings.EqualFold(r.Name, "Com_stmt_prepare") {
					total += r.Value
				} else {
					total -= r.Value
				}
			}
		default:
			e.T.Fatalf("no count of prepared statements on %s", e.D.Name())
		}
	}
	return total
}

// globalPreparedStatements is MariaDB/MySQL's server-wide count, for the
// log only: other clients of the server move it too.
func (e *Env) globalPreparedStatements() string {
	if e.D.Name() != dialect.MySQL {
		return "n/a"
	}
	var name, value string
	if err := e.DB.NewRaw("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(e.Ctx, &name, &value); err != nil {
		return fmt.Sprintf("unreadable (%v)", err)
	}
	return value
}

// queryLog is a bun.QueryHook that keeps the text of every statement that
// succeeded.
type queryLog struct {
	mu      sync.Mutex
	queries []string
}

func (l *queryLog) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (l *queryLog) AfterQuery(_ context.Context, ev *bun.QueryEvent) {
	if ev.Err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, ev.Query)
}

// matching returns the statements seen that contain every one of parts.
func (l *queryLog) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, q := range l.queries {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(q, p)
		}
		if all {
			out = append(out, q)
		}
	}
	return out
}

// stmtKind is a kind of statement and the parts that mark it.
type stmtKind struct {
	name  string
	parts []string
}

// processorStatements are the processor's statements: a lease
// (PostgreSQL's reads its batch too), a batch read, an ack.
func (e *Env) processorStatements() []stmtKind {
	return []stmtKind{
		{"lease", []string{e.Prefix + "processor SET locked_by"}},
		{"batch read", []string{e.Prefix + "outgoing", "o.body_id, o.purged"}},
		{"ack", []string{e.Prefix + "processor SET processed_seq"}},
	}
}

// deliverOneByOne delivers n messages on a one-partition queue of ob, one
// at a time, so that every lease and ack runs alone (never in a group).
func deliverOneByOne(e *Env, ob *Outbox, db *bun.DB, queue string, n int) {
	e.T.Helper()
	for range n {
		id, err := ob.Enqueue(e.Ctx, db, queue, outbox.Message{PayloadType: "t"})
		require.NoError(e.T, err)
		require.NoError(e.T, ob.WaitProcessed(e.Ctx, id))
	}
}

// testQueryHooksSeeProcessor: a bun.QueryHook on the *bun.DB seqbox was
// given sees the processor's statements too. The hot ones run as prepared
// statements, which bun's hooks did not see: tracing and query logging
// missed every lease, batch read and ack.
func testQueryHooksSeeProcessor(e *Env) {
	hook := &queryLog{}
	db := e.DB.WithQueryHook(hook)
	ob := e.Start(e.BuilderOn(db).Queue("hooked", 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil })))
	deliverOneByOne(e, ob, db, "hooked", 3)
	var unseen []string
	for _, k := range e.processorStatements() {
		if len(hook.matching(k.parts...)) == 0 {
			unseen = append(unseen, fmt.Sprintf("%s (a statement with %q)", k.name, k.parts))
		}
	}
	require.Empty(e.T, unseen, "statements the query hook never saw")
}

// asyncCommit is the setting seqbox's own PostgreSQL transactions take.
const asyncCommit = "set_config('synchronous_commit', 'off', true)"

// testAsyncCommits pins what docs/ARCHITECTURE.md ("Asynchronous commits")
// describes on PostgreSQL: seqbox's leases and acks, and the transaction a
// transactional handler runs in, commit without waiting for the log flush;
// the application's enqueue transactions are left as they are. A server
// crash can therefore lose the attempt count of a lease taken in its last
// moments, which the dialect's documentation must say (it once called the
// lease durable).
func testAsyncCommits(e *Env) {
	if e.D.Name() != dialect.Postgres {
		e.T.Skipf("%s commits as the server is set (innodb_flush_log_at_trx_commit is global; SQLite's synchronous mode is the DSN's)", e.D.Name())
	}
	hook := &queryLog{}
	db := e.DB.WithQueryHook(hook)
	ob := e.Start(e.BuilderOn(db).Queue("async", 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).
		Queue("asynctx", 1, nil))
	deliverOneByOne(e, ob, db, "async", 3)
	for _, k := range e.processorStatements() {
		if k.name == "batch read" {
			continue // a read commits nothing
		}
		seen := hook.matching(k.parts...)
		require.NotEmpty(e.T, seen, "the hook saw no %s", k.name)
		for _, q := range seen {
			require.Contains(e.T, q, asyncCommit, "a %s that waits for the log flush", k.name)
		}
	}

	// The application's transaction keeps its own setting; the
	// transactional handler's, which starts with the processor row lock,
	// commits asynchronously.
	setting := func(tx bun.Tx) string {
		var v string
		require.NoError(e.T, tx.NewRaw("SELECT current_setting('synchronous_commit')").Scan(e.Ctx, &v))
		return v
	}
	require.NoError(e.T, db.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		own := setting(tx)
		if _, err := ob.Enqueue(ctx, tx, "asynctx", outbox.Message{PayloadType: "t"}); err != nil {
			return err
		}
		require.Equal(e.T, own, setting(tx), "an enqueue changed the application's commit setting")
		return nil
	}))
	// Sequenced by this call or by the outbox's own sequencer, which may
	// hold the partition meanwhile (the call then skips it).
	pid := ob.PartitionIDs("asynctx")[0]
	e.Eventually("the message to be sequenced", func() bool {
		_, err := e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: []int64{pid}, Limit: 10})
		require.NoError(e.T, err)
		var sequenced int
		require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? WHERE partition_id = ?", bun.Ident(e.Prefix+"outgoing"), pid).Scan(e.Ctx, &sequenced))
		return sequenced > 0
	})
	require.NoError(e.T, e.D.RunInTx(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
		lock, err := e.D.ProcessorLock(ctx, &dialect.ProcessorLockParams{Conn: tx, PartitionID: pid})
		require.NoError(e.T, err)
		require.True(e.T, lock.Locked)
		require.Equal(e.T, "off", setting(tx), "a transactional handler's transaction that waits for the log flush")
		return nil
	}))
}
