package conformance

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
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

// commitSetting marks the statements that set seqbox's synchronous_commit
// for their transaction; its value is bound (postgres.WithSynchronousCommit).
const commitSetting = "set_config('synchronous_commit', "

// commitSession is the synchronous_commit AsyncCommits' connections start
// with: neither the server's default nor seqbox's.
const commitSession = "remote_write"

// testAsyncCommits pins what docs/ARCHITECTURE.md ("Asynchronous commits")
// describes on PostgreSQL: seqbox's moves, leases, acks and prunes, and
// the transaction a transactional handler runs in, commit with the
// synchronous_commit that postgres.WithSynchronousCommit chose (off by
// default: without waiting for the log flush, nor for a standby); the
// application's enqueue transactions are left as they are. It runs on
// connections whose own default is remote_write, so that each mode is
// seen to win over the session's (explicit values) or to keep it
// (Inherit). What each transaction had is read inside it, by row triggers
// on processor (updates) and outgoing (moves insert, prunes delete) that
// log current_setting('synchronous_commit'). A server crash can therefore
// lose the attempt count of a lease taken in its last moments under the
// default, which the dialect's documentation must say (it once called the
// lease durable); docs/FAILOVER.md says what a failover can lose.
func testAsyncCommits(e *Env) {
	if e.D.Name() != dialect.Postgres {
		e.T.Skipf("%s commits as the server is set (innodb_flush_log_at_trx_commit is global; SQLite's synchronous mode is the DSN's)", e.D.Name())
	}
	db := dbtest.PostgresSession(e.T, "synchronous_commit="+commitSession)
	commitLog := e.ScratchTable("commit_log", "tbl TEXT NOT NULL, op TEXT NOT NULL, setting TEXT NOT NULL")
	fn := bun.Ident(e.Prefix + "log_commit")
	_, err := e.DB.NewRaw(`CREATE FUNCTION ?() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO `+commitLog+` (tbl, op, setting) VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit'));
	RETURN NULL;
END $$`, fn).Exec(e.Ctx)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _, _ = e.DB.NewRaw("DROP FUNCTION IF EXISTS ?() CASCADE", fn).Exec(context.Background()) })
	for table, ops := range map[string]string{"processor": "UPDATE", "outgoing": "INSERT OR DELETE"} {
		_, err := e.DB.NewRaw("CREATE TRIGGER ? AFTER "+ops+" ON ? FOR EACH ROW EXECUTE FUNCTION ?()",
			bun.Ident(e.Prefix+"log_"+table), bun.Ident(e.Prefix+table), fn).Exec(e.Ctx)
		require.NoError(e.T, err)
	}

	for _, mode := range []struct {
		opt  postgres.SynchronousCommit
		want string
	}{
		{"", "off"}, // the default
		{postgres.SynchronousCommitLocal, "local"},
		{postgres.SynchronousCommitOn, "on"},
		{postgres.SynchronousCommitInherit, commitSession},
	} {
		e.T.Run(string(cmp.Or(mode.opt, "default")), func(t *testing.T) {
			_, err := e.DB.NewRaw("DELETE FROM ?", bun.Ident(commitLog)).Exec(e.Ctx)
			require.NoError(t, err)
			checkCommitSetting(e, t, db, commitLog, mode.opt, mode.want)
		})
	}
}

// generation is the suffix of a generation's partition of a rotated table.
var generation = regexp.MustCompile(`_g[0-9]$`)

// checkCommitSetting runs an outbox with mode on db through every kind of
// transaction seqbox commits, and checks each had want.
func checkCommitSetting(e *Env, t *testing.T, db *bun.DB, commitLog string, mode postgres.SynchronousCommit, want string) {
	hook := &queryLog{}
	hooked := db.WithQueryHook(hook)
	// Rotation off: the row-by-row prune's commits are among those checked
	// (a rotation's truncation commits as the server is set: docs/ROTATION.md).
	b := e.BuilderOn(hooked).RotateInterval(-1)
	if mode != "" {
		b = b.PostgresOptions(postgres.WithSynchronousCommit(mode))
	}
	leased, txq, bulk := "async_"+want, "asynctx_"+want, "asyncbulk_"+want
	var inHandler sync.Map // the transactional handler's setting, by message
	ob, err := StartOutbox(e.Ctx, b.
		Queue(leased, 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).
		Queue(bulk, 8, processor.Leased(func(context.Context, processor.Delivery) error { return nil })).
		Queue(txq, 2, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
			var v string
			if err := tx.NewRaw("SELECT current_setting('synchronous_commit')").Scan(ctx, &v); err != nil {
				return err
			}
			inHandler.Store(d.ID, v)
			return nil
		})))
	require.NoError(t, err)
	defer func() { require.NoError(t, ob.Stop(e.Ctx)) }()

	deliverOneByOne(e, ob, hooked, leased, 3) // single leases and acks
	for _, k := range e.processorStatements() {
		if k.name == "batch read" {
			continue // a read commits nothing
		}
		seen := hook.matching(append([]string{leased}, k.parts...)...)
		if len(seen) == 0 {
			seen = hook.matching(k.parts...)
		}
		require.NotEmpty(t, seen, "the hook saw no %s", k.name)
		for _, q := range seen {
			require.Contains(t, q, commitSetting, "a %s that does not set seqbox's commit setting", k.name)
		}
	}

	// Many partitions at once (grouped leases and acks where they form)
	// and a transactional queue, each enqueue in the application's own
	// transaction, which keeps its setting.
	var ids []outbox.MessageID
	require.NoError(t, hooked.RunInTx(e.Ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for i := range 16 {
			m := outbox.Message{Key: fmt.Sprintf("k%d", i), PayloadType: "t"}
			for _, q := range []string{bulk, txq} {
				id, err := ob.Enqueue(ctx, tx, q, m)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
		}
		var v string
		require.NoError(t, tx.NewRaw("SELECT current_setting('synchronous_commit')").Scan(ctx, &v))
		require.Equal(t, commitSession, v, "an enqueue changed the application's commit setting")
		return nil
	}))
	require.NoError(t, ob.WaitProcessed(e.Ctx, ids...))
	e.Settled(ob) // pruned: the vacuum's transactions are logged too

	n := 0
	inHandler.Range(func(_, v any) bool {
		n++
		require.Equal(t, want, v, "a transactional handler's transaction")
		return true
	})
	require.Equal(t, 16, n, "the transactional handler ran once per message")
	var rows []struct {
		Tbl     string `bun:"tbl"`
		Op      string `bun:"op"`
		Setting string `bun:"setting"`
		N       int    `bun:"n"`
	}
	require.NoError(t, e.DB.NewRaw("SELECT tbl, op, setting, COUNT(*) AS n FROM ? GROUP BY tbl, op, setting ORDER BY tbl, op, setting",
		bun.Ident(commitLog)).Scan(e.Ctx, &rows))
	kinds := map[string]bool{}
	for _, r := range rows {
		require.Equal(t, want, r.Setting, "%d %s of %s committed with synchronous_commit=%s", r.N, r.Op, r.Tbl, r.Setting)
		// A row trigger names the partition: outgoing_g0..2 on PostgreSQL.
		kinds[generation.ReplaceAllString(strings.TrimPrefix(r.Tbl, e.Prefix), "")+" "+r.Op] = true
	}
	require.Equal(t, map[string]bool{"processor UPDATE": true, "outgoing INSERT": true, "outgoing DELETE": true}, kinds,
		"leases and acks (processor), moves (outgoing inserts) and prunes (outgoing deletes) were all seen")
}
