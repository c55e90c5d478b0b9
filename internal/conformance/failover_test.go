package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver: multi-host DSNs
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/pgpair"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Failover figures: small enough for the suite's budget, large enough that
// the kill lands among producers committing and consumers delivering.
const (
	failoverBeforeKill   = 60 // deliveries per outbox before the primary is killed
	failoverAfterPromote = 30 // ledger rows per outbox committed on the new primary
)

// TestPostgresFailover is docs/FAILOVER.md's test. A private primary with a
// synchronous streaming standby (pgpair.Start); the clients'
// one DSN names both hosts with target_session_attrs=read-write (pgx). Two
// outboxes run side by side on it, one per setting of
// postgres.WithSynchronousCommit (off, the default, and on), each with the
// crash test's ledger queues (leased and transactional) and two producers
// committing. Once both have delivered, the primary is SIGKILLed with every
// process of it, and the standby promoted; the same outboxes, never
// restarted, go on through the new primary. Then, for each setting:
//
//   - every message whose commit returned nil is in the ledger on the new
//     primary, and the delivered table matches the ledger (checkLedger: no
//     loss, per-partition order, gap-free seqs, the transactional queue's
//     effect rows exactly once, nothing dead-lettered);
//   - what the leased handler was handed, recorded outside the database
//     (an external system's view): under on, checkLedger holds for it too,
//     seqs included; under off, every message reached it and each key's
//     messages first reached it in commit order, but seqs it saw before
//     the kill may have been handed out again (docs/FAILOVER.md says why),
//     which the test counts and logs.
func TestPostgresFailover(t *testing.T) {
	t.Parallel()
	began := time.Now()
	pair := pgpair.Start(t, pgpair.Config{})
	t.Logf("primary :%d and synchronous standby :%d up in %v", pair.Primary.Port, pair.Standby.Port, time.Since(began).Round(time.Millisecond))
	sqldb, err := sql.Open("pgx", pair.DSN())
	require.NoError(t, err)
	sqldb.SetMaxOpenConns(40)
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a failure bound
	defer cancel()

	runs := []*failoverRun{
		{mode: postgres.SynchronousCommitDefault},
		{mode: postgres.SynchronousCommitOn},
	}
	for i, r := range runs {
		r.start(t, ctx, db, uint64(began.UnixNano())+uint64(i))
	}
	waitAll(t, ctx, "every outbox to deliver before the kill", func() bool {
		for _, r := range runs {
			if r.count(ctx, deliveredTable(r.e.Prefix)) < failoverBeforeKill || r.ext.leasedCount() == 0 {
				return false
			}
		}
		return true
	})
	before := make([]int, len(runs))
	for i, r := range runs {
		before[i] = r.count(ctx, deliveredTable(r.e.Prefix))
	}
	killed := time.Now()
	pair.KillPrimary()
	reaped := time.Now()
	pair.Promote(ctx)
	promoted := time.Now()
	t.Logf("primary SIGKILLed (reaped in %v), standby promoted in %v; deliveries before the kill: %v",
		reaped.Sub(killed).Round(time.Millisecond), promoted.Sub(reaped).Round(time.Millisecond), before)

	// The same outboxes, through the same DSN, reach the new primary.
	ledgerAt := make([]int, len(runs))
	for i, r := range runs {
		ledgerAt[i] = r.countRetrying(ctx, ledgerTable(r.e.Prefix))
	}
	waitAll(t, ctx, "producers to commit on the new primary", func() bool {
		for i, r := range runs {
			if r.count(ctx, ledgerTable(r.e.Prefix)) < ledgerAt[i]+failoverAfterPromote {
				return false
			}
		}
		return true
	})
	t.Logf("clients committing on the new primary %v after the promotion", time.Since(promoted).Round(time.Millisecond))
	for _, r := range runs {
		r.stopProducers()
	}
	for _, r := range runs {
		t.Run(string(r.mode), func(t *testing.T) { r.verify(t) })
	}
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// failoverRun is one outbox of the failover test, with its producers and
// the external record of its leased handler.
type failoverRun struct {
	mode      postgres.SynchronousCommit
	e         *Env
	ob        *Outbox
	ext       *externalRecord
	producers []*ledgerProducer
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

func (r *failoverRun) start(t *testing.T, ctx context.Context, db *bun.DB, seed uint64) {
	t.Helper()
	prefix := dbtest.Prefix(t)
	opt := postgres.WithSynchronousCommit(r.mode)
	d, err := dialects.Open(ctx, db, prefix, opt)
	require.NoError(t, err)
	r.e = &Env{T: t, Ctx: ctx, DB: db, Prefix: prefix, D: d}
	createLedgerTables(r.e)
	r.ext = &externalRecord{}
	// Env.Builder's settings but its listener (dbtest's is pgdriver's):
	// other processes' work is found by polling.
	b := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(r.e.Logger()).InstanceID("failover-" + string(r.mode)).
		PollInterval(50 * time.Millisecond).ReconcileInterval(200 * time.Millisecond).VacuumInterval(100 * time.Millisecond).
		PostgresOptions(opt).QueueDefaults(processor.Use(r.ext.middleware))
	r.ob = r.e.Start(ledgerQueues(b, db, prefix, true))
	pctx, stop := context.WithCancel(ctx)
	r.stop = stop
	for slot := range crashProducers {
		p := newLedgerProducer(r.ob, db, prefix, slot, crashProducers, seed)
		r.producers = append(r.producers, p)
		r.wg.Go(func() { p.run(pctx, crashPause) })
	}
	t.Cleanup(r.stopProducers)
}

func (r *failoverRun) stopProducers() {
	r.stop()
	r.wg.Wait()
}

// count is COUNT(*) of table, -1 on an error (the pool meeting the dead
// primary).
func (r *failoverRun) count(ctx context.Context, table bun.Ident) int {
	var n int
	if err := r.e.DB.NewRaw("SELECT COUNT(*) FROM ?", table).Scan(ctx, &n); err != nil {
		return -1
	}
	return n
}

// countRetrying is count once it succeeds.
func (r *failoverRun) countRetrying(ctx context.Context, table bun.Ident) int {
	for {
		if n := r.count(ctx, table); n >= 0 || ctx.Err() != nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// verify checks one outbox after the failover; see TestPostgresFailover.
func (r *failoverRun) verify(t *testing.T) {
	e := *r.e
	e.T = t
	drainLedger(&e, r.ob)
	var ledger []ledgerRow
	require.NoError(t, e.DB.NewRaw("SELECT message_id, queue, k, n FROM ?", ledgerTable(e.Prefix)).Scan(e.Ctx, &ledger))
	inLedger := make(map[string]bool, len(ledger))
	for _, l := range ledger {
		inLedger[l.MessageID] = true
	}
	acked, failed := 0, 0
	for _, p := range r.producers {
		failed += p.failed
		for _, id := range p.acked {
			acked++
			require.True(t, inLedger[id], "lost: %s was committed (its commit returned nil) but the promoted standby does not have it", id)
		}
	}
	require.Positive(t, failed, "no producer transaction failed: the kill met no producer at work")
	verifyLedger(&e)

	var leased []ledgerRow
	for _, l := range ledger {
		if l.Queue == ledgerLeased {
			leased = append(leased, l)
		}
	}
	seen := r.ext.rows()
	reassigned := reassignedSeqs(seen)
	if r.mode == postgres.SynchronousCommitOn {
		problems := checkLedger(leased, seen)
		require.Empty(t, problems, "the leased handler's deliveries, as an external system saw them")
	} else {
		require.Empty(t, firstDeliveryProblems(leased, seen), "the leased handler's deliveries, as an external system saw them")
	}
	t.Logf("synchronous_commit %s: %d messages acknowledged to producers (%d transactions failed in the failover), %d in the ledger; "+
		"the leased handler was handed %d deliveries, %d messages of them under a seq that was later handed to another message",
		r.mode, acked, failed, len(ledger), len(seen), reassigned)
}

// externalRecord is what the leased handler was handed, kept outside the
// database as a broker or another service would see it: recorded when a
// call starts, before the handler writes anything.
type externalRecord struct {
	mu     sync.Mutex
	seen   []deliveryRow
	leased atomic.Int64
}

func (x *externalRecord) middleware(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
	if c.Mode == processor.ModeLeased {
		x.mu.Lock()
		for _, d := range c.Batch.Messages[c.Batch.Acked():] {
			x.seen = append(x.seen, deliveryRow{ID: int64(len(x.seen) + 1), MessageID: d.ID.String(), Queue: d.Queue,
				Part: d.Partition, Seq: d.Seq, Payload: string(d.Payload)})
			x.leased.Add(1)
		}
		x.mu.Unlock()
	}
	return next(ctx)
}

func (x *externalRecord) leasedCount() int64 { return x.leased.Load() }

func (x *externalRecord) rows() []deliveryRow {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.seen)
}

// reassignedSeqs counts the messages that were handed over under a seq
// that another message was later handed under (or that were handed under
// two seqs): seqs the failover undid and handed out again.
func reassignedSeqs(seen []deliveryRow) int {
	type at struct {
		part int
		seq  int64
	}
	ids, seqs := map[at]map[string]bool{}, map[string]map[int64]bool{}
	for _, d := range seen {
		k := at{d.Part, d.Seq}
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		ids[k][d.MessageID] = true
		if seqs[d.MessageID] == nil {
			seqs[d.MessageID] = map[int64]bool{}
		}
		seqs[d.MessageID][d.Seq] = true
	}
	moved := map[string]bool{}
	for _, m := range ids {
		if len(m) > 1 {
			for id := range m {
				moved[id] = true
			}
		}
	}
	for id, s := range seqs {
		if len(s) > 1 {
			moved[id] = true
		}
	}
	return len(moved)
}

// firstDeliveryProblems is what holds of an external record when seqs may
// have been handed out again: every ledger message was handed over, and
// each key's messages were first handed over in the order they committed.
func firstDeliveryProblems(ledger []ledgerRow, seen []deliveryRow) []string {
	var problems []string
	first := map[string]bool{}
	last := map[string]int{} // by key
	byID := make(map[string]ledgerRow, len(ledger))
	for _, l := range ledger {
		byID[l.MessageID] = l
	}
	for _, d := range seen { // in the order the handler was called
		l, ok := byID[d.MessageID]
		if !ok {
			problems = append(problems, fmt.Sprintf("handed %s (payload %q), which is not in the ledger", d.MessageID, d.Payload))
			continue
		}
		if first[d.MessageID] {
			continue
		}
		first[d.MessageID] = true
		if l.N < last[l.K] {
			problems = append(problems, fmt.Sprintf("key %s: n %d first handed over after n %d", l.K, l.N, last[l.K]))
		}
		last[l.K] = max(last[l.K], l.N)
	}
	for _, l := range ledger {
		if !first[l.MessageID] {
			problems = append(problems, fmt.Sprintf("lost: %s (key %s n %d) never handed to the leased handler", l.MessageID, l.K, l.N))
		}
	}
	return problems
}

// waitAll polls cond until it holds (a failure bound, not a timing
// assumption).
func waitAll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPostgresFailoverLosesAsyncMove pins the one thing a failover does to
// a delivered message under synchronous_commit off that a crash test of
// the processes cannot show (docs/FAILOVER.md, "What a failover can undo"):
// the seq a leased handler was handed can go to another message. Two
// producer transactions overlap: A takes its xid first, B commits first.
// A move sees B alone and numbers it 1, A commits (waiting for the
// standby, as an application's commit does) while the move is still
// running, the move commits, a lease hands B over as seq 1, and the
// primary dies before the move reaches the standby: its WAL writer is
// stopped, so no background flush carries it there, and no commit waits
// after it. On the new primary the move is made again, from A's xid: A is
// seq 1 and B seq 2. Under synchronous_commit on the move's commit waits
// for the standby, so B keeps seq 1 and its lease survives.
func TestPostgresFailoverLosesAsyncMove(t *testing.T) {
	t.Parallel()
	began := time.Now()
	pair := pgpair.Start(t, pgpair.Config{Settings: []string{"autovacuum=off", "bgwriter_lru_maxpages=0", "checkpoint_timeout=1h"}})
	t.Logf("pair up in %v", time.Since(began).Round(time.Millisecond))
	sqldb, err := sql.Open("pgx", pair.DSN())
	require.NoError(t, err)
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	defer cancel()

	on, off := &overlapMove{mode: postgres.SynchronousCommitOn}, &overlapMove{mode: postgres.SynchronousCommitOff}
	on.setup(t, ctx, db)
	off.setup(t, ctx, db)
	pair.StopWALWriter()
	// on first: its synchronous commits flush whatever precedes them, and
	// nothing may wait for a flush after off's move.
	on.run(t, ctx, db)
	off.run(t, ctx, db)
	t.Logf("scenarios played at %v", time.Since(began).Round(time.Millisecond))
	pair.KillPrimary()
	pair.Promote(ctx)
	t.Logf("promoted at %v", time.Since(began).Round(time.Millisecond))

	on.check(t, ctx, db, "B", "A", true)
	off.check(t, ctx, db, "A", "B", false)
	t.Logf("checked at %v", time.Since(began).Round(time.Millisecond))
}

// overlapMove is TestPostgresFailoverLosesAsyncMove's scenario on one
// partition of its own tables.
type overlapMove struct {
	mode   postgres.SynchronousCommit
	prefix string
	d      dialect.Dialect
	pid    int64
	ids    map[string]dialect.MessageID // "A", "B"
}

func (o *overlapMove) setup(t *testing.T, ctx context.Context, db *bun.DB) {
	t.Helper()
	o.prefix = dbtest.Prefix(t)
	d, err := dialects.Open(ctx, db, o.prefix, postgres.WithSynchronousCommit(o.mode))
	require.NoError(t, err)
	o.d = d
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 1}}})
	require.NoError(t, err)
	o.pid = pids[0][0]
	ids := make([][16]byte, 2)
	require.NoError(t, uuidv7.Fill(ids, time.Now()))
	o.ids = map[string]dialect.MessageID{"A": ids[0], "B": ids[1]}
}

func (o *overlapMove) insert(ctx context.Context, conn bun.IConn, name string) error {
	return o.d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: conn, ChunkRows: 10, ChunkBytes: 1 << 20,
		Rows: []dialect.MessageRow{{ID: o.ids[name], PartitionID: o.pid, PayloadType: "t", Payload: []byte(name)}}})
}

// run plays the scenario up to the lease, which must hand B over as seq 1.
func (o *overlapMove) run(t *testing.T, ctx context.Context, db *bun.DB) {
	t.Helper()
	txA, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback() }()
	require.NoError(t, o.insert(ctx, txA, "A")) // A's xid is taken here
	require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return o.insert(ctx, tx, "B") }))

	// T holds seq 1's key uncommitted, so the move, having read B alone,
	// waits at its insert until T rolls back.
	txT, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = txT.Rollback() }()
	_, err = txT.NewRaw("INSERT INTO ? (partition_id, seq, body_id) VALUES (?, 1, ?)", bun.Ident(o.prefix+"outgoing"), o.pid, []byte{0}).Exec(ctx)
	require.NoError(t, err)
	type result struct {
		res dialect.SequenceMoveResult
		err error
	}
	moved := make(chan result, 1)
	go func() {
		res, err := o.d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: o.pid, Limit: 10})
		moved <- result{res, err}
	}()
	waitAll(t, ctx, "the move to wait at its insert", func() bool {
		var n int
		err := db.NewRaw("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ?",
			"INSERT INTO "+o.prefix+"outgoing%").Scan(ctx, &n)
		return err == nil && n == 1
	})
	require.NoError(t, txA.Commit())   // durable on the standby when it returns
	require.NoError(t, txT.Rollback()) // the move goes on and commits
	m := <-moved
	require.NoError(t, m.err)
	require.Equal(t, dialect.SequenceMoveResult{PartitionID: o.pid, Moved: 1, FirstSeq: 1, LastSeq: 1}, m.res, "the move numbered B alone")
	lease, err := o.d.ProcessorLease(ctx, &dialect.ProcessorLeaseParams{PartitionID: o.pid, Owner: "handler", Duration: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.True(t, lease.Leased)
	require.Len(t, lease.Messages, 1)
	require.Equal(t, int64(1), lease.Messages[0].Seq)
	require.Equal(t, o.ids["B"], lease.Messages[0].ID, "the handler is handed B as seq 1")
}

// check moves what is left on the new primary and reads the partition:
// want1 and want2 at seqs 1 and 2, the lease kept or lost.
func (o *overlapMove) check(t *testing.T, ctx context.Context, db *bun.DB, want1, want2 string, leaseKept bool) {
	t.Helper()
	for {
		res, err := o.d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: o.pid, Limit: 10})
		if err != nil && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond) // the pool meeting the dead primary
			continue
		}
		require.NoError(t, err)
		if res.Moved == 0 {
			break
		}
	}
	var rows []struct {
		Seq    int64  `bun:"seq"`
		BodyID []byte `bun:"body_id"`
	}
	require.NoError(t, db.NewRaw("SELECT seq, body_id FROM ? WHERE partition_id = ? ORDER BY seq", bun.Ident(o.prefix+"outgoing"), o.pid).
		Scan(ctx, &rows))
	a, b := o.ids["A"], o.ids["B"]
	name := map[string]string{string(a[:]): "A", string(b[:]): "B"}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d:%s", r.Seq, name[string(r.BodyID)]))
	}
	require.Equal(t, []string{"1:" + want1, "2:" + want2}, got, "synchronous_commit %s: the partition after the failover", o.mode)
	var owner sql.NullString
	require.NoError(t, db.NewRaw("SELECT locked_by FROM ? WHERE partition_id = ?", bun.Ident(o.prefix+"processor"), o.pid).Scan(ctx, &owner))
	require.Equal(t, leaseKept, owner.Valid, "synchronous_commit %s: the handler's lease survived the failover", o.mode)
	t.Logf("synchronous_commit %s: the handler was handed B as seq 1; after the failover %v, lease kept: %v", o.mode, got, owner.Valid)
}

// TestPostgresFailoverAsyncReplication pins the recovery point under
// asynchronous replication (docs/FAILOVER.md): a failover loses the
// transactions the standby had not received, commits that returned nil
// included, and seqbox loses their messages with them, never one without
// the other. A leased handler may already have been handed such a message,
// and its seq goes to the next message enqueued on the new primary. The
// standby's stream is cut (its proxy goes down) after message W has
// reached it; message X is committed with a business row, and handed to
// the handler, on the primary alone; the primary dies and the standby is
// promoted. The same outbox then delivers Y, under X's seq.
func TestPostgresFailoverAsyncReplication(t *testing.T) {
	t.Parallel()
	pair := pgpair.Start(t, pgpair.Config{Asynchronous: true})
	sqldb, err := sql.Open("pgx", pair.DSN())
	require.NoError(t, err)
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	defer cancel()
	prefix := dbtest.Prefix(t)
	d, err := dialects.Open(ctx, db, prefix)
	require.NoError(t, err)
	e := &Env{T: t, Ctx: ctx, DB: db, Prefix: prefix, D: d}
	orders := e.ScratchTable("orders", "name TEXT PRIMARY KEY")
	ext := &externalRecord{}
	ob := e.Start(seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(e.Logger()).
		PollInterval(50*time.Millisecond).ReconcileInterval(200*time.Millisecond).
		Queue("q", 1, processor.Leased(func(context.Context, processor.Delivery) error { return nil }),
			processor.Use(ext.middleware), processor.Retry(10*time.Millisecond, 200*time.Millisecond),
			processor.MaxAttempts(processor.MaxAttemptsNever), processor.Lease(time.Second, 200*time.Millisecond)))
	enqueue := func(name string) (outbox.MessageID, error) {
		var id outbox.MessageID
		err := ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewRaw("INSERT INTO ? (name) VALUES (?)", bun.Ident(orders), name).Exec(ctx); err != nil {
				return err
			}
			var err error
			id, err = ob.Enqueue(ctx, tx, "q", outbox.Message{Key: "k", PayloadType: "order", Payload: []byte(name)})
			return err
		})
		return id, err
	}
	handed := func(id outbox.MessageID) (int64, bool) {
		for _, r := range ext.rows() {
			if r.MessageID == id.String() {
				return r.Seq, true
			}
		}
		return 0, false
	}

	w, err := enqueue("W")
	require.NoError(t, err)
	require.NoError(t, ob.WaitProcessed(ctx, w))
	standby, err := sql.Open("pgx", pair.Standby.DSN())
	require.NoError(t, err)
	defer standby.Close()
	waitAll(t, ctx, "the standby to replay W", func() bool {
		var n int
		return standby.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+orders+" WHERE name = 'W'").Scan(&n) == nil && n == 1
	})
	pair.Replication.Down()
	x, err := enqueue("X")
	require.NoError(t, err, "under asynchronous replication a commit does not wait for the standby")
	require.NoError(t, ob.WaitProcessed(ctx, x))
	seqX, ok := handed(x)
	require.True(t, ok, "the handler was handed X")
	pair.KillPrimary()
	pair.Promote(ctx)

	var y outbox.MessageID
	waitAll(t, ctx, "an enqueue on the new primary", func() bool {
		y, err = enqueue("Y")
		return err == nil
	})
	require.NoError(t, ob.WaitProcessed(ctx, y))
	var names []string
	require.NoError(t, db.NewRaw("SELECT name FROM ? ORDER BY name", bun.Ident(orders)).Scan(ctx, &names))
	require.Equal(t, []string{"W", "Y"}, names, "X's transaction, committed on the primary alone, is gone")
	var bodies int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ? WHERE id = ?", bun.Ident(prefix+"body"), x[:]).Scan(ctx, &bodies))
	require.Zero(t, bodies, "X's message is gone with its transaction")
	seqY, ok := handed(y)
	require.True(t, ok)
	require.Equal(t, seqX, seqY, "the seq the handler saw X under now carries Y")
	t.Logf("asynchronous replication: X committed and handed over as seq %d on the old primary; gone after the failover, and Y has seq %d", seqX, seqY)
}
