package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// floorsFixture is a MariaDB dialect with a migrated schema of its own and
// one queue of two partitions.
type floorsFixture struct {
	t    *testing.T
	ctx  context.Context
	db   *bun.DB
	d    *mysqlDialect
	pids []int64
}

func newFloorsFixture(t *testing.T, db *bun.DB) *floorsFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	t.Cleanup(cancel)
	prefix := dbtest.Prefix(t)
	dl, err := New(ctx, db, prefix)
	require.NoError(t, err)
	d := dl.(*mysqlDialect)
	if d.floors == nil {
		t.Skip("the move floors are MariaDB's; this server is MySQL")
	}
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	t.Cleanup(func() { _ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{}) })
	pids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 2}}})
	require.NoError(t, err)
	return &floorsFixture{t: t, ctx: ctx, db: db, d: d, pids: pids[0]}
}

// holdReadView opens a read view on a connection of its own, held until
// the test ends: InnoDB keeps every entry deleted after it.
func (f *floorsFixture) holdReadView() bun.Conn {
	f.t.Helper()
	reader, err := f.db.Conn(f.ctx)
	require.NoError(f.t, err)
	f.t.Cleanup(func() {
		_, _ = reader.ExecContext(context.Background(), `ROLLBACK`)
		_ = reader.Close()
	})
	_, err = reader.ExecContext(f.ctx, `START TRANSACTION WITH CONSISTENT SNAPSHOT`)
	require.NoError(f.t, err)
	return reader
}

// enqueue writes one message to pid on conn and returns its incoming id.
func (f *floorsFixture) enqueue(conn bun.IConn, pid int64) int64 {
	f.t.Helper()
	var raw [1][16]byte
	require.NoError(f.t, uuidv7.Fill(raw[:], time.Now()))
	require.NoError(f.t, f.d.MessageInsertMany(f.ctx, &dialect.MessageInsertManyParams{Conn: conn,
		Rows: []dialect.MessageRow{{ID: raw[0], PartitionID: pid, PayloadType: "t", Payload: []byte("p")}}, ChunkRows: 10, ChunkBytes: 1 << 20}))
	var id int64
	require.NoError(f.t, conn.QueryRowContext(f.ctx, `SELECT i.id FROM ? i WHERE i.body_id = ?`, bun.Ident(f.d.Tables().Incoming), raw[0][:]).Scan(&id))
	return id
}

// move moves pid's rows, as the sequencer does, and returns how many.
func (f *floorsFixture) move(pid int64) int {
	f.t.Helper()
	res, err := f.d.SequenceMove(f.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 100})
	require.NoError(f.t, err)
	require.False(f.t, res.Skipped)
	return res.Moved
}

// state reads the fence and pid's floor.
func (f *floorsFixture) state(pid int64) (safe, floor int64) {
	fl := f.d.floors
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.safe, fl.floor[pid]
}

// step runs one fence step.
func (f *floorsFixture) step() {
	f.t.Helper()
	f.d.floors.step.Lock()
	defer f.d.floors.step.Unlock()
	require.NoError(f.t, f.d.fenceStep(f.ctx))
}

// fenceBegins runs fence steps until a fence waits on open writers or the
// fence has moved, and returns the fence. A listing read before the
// canary's transaction was in InnoDB's cache begins no fence: read again.
func (f *floorsFixture) fenceBegins(from int64) int64 {
	f.t.Helper()
	for {
		f.step()
		f.d.floors.step.Lock()
		waiting := f.d.floors.fence != nil
		f.d.floors.step.Unlock()
		if safe, _ := f.state(0); waiting || safe != from {
			return safe
		}
		f.pause("the fence never began")
	}
}

// fenceReaches runs fence steps until the fence is at least id.
func (f *floorsFixture) fenceReaches(id int64) {
	f.t.Helper()
	for {
		f.step()
		if safe, _ := f.state(0); safe >= id {
			return
		}
		f.pause(fmt.Sprintf("the fence never reached %d", id))
	}
}

// pause waits before the next fence step, failing at the test's bound.
// InnoDB refreshes the listing's cache only once nobody has read it for
// 0.1 s (floors.go): a faster poll would keep it stale for good.
func (f *floorsFixture) pause(failure string) {
	select {
	case <-f.ctx.Done():
		f.t.Fatal(failure)
	case <-time.After(150 * time.Millisecond):
	}
}

// TestFloorsWaitForOpenWriters: a message enqueued before another but
// committed after it, in the same partition, is moved after it. The fence
// must not pass its id while its transaction is open: a floor above it
// would skip it for good (docs/ARCHITECTURE.md, "Cost that stays flat", move floors).
func TestFloorsWaitForOpenWriters(t *testing.T) {
	f := newFloorsFixture(t, dbtest.MySQL(t))
	pid := f.pids[0]

	late, err := f.db.BeginTx(f.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	require.NoError(t, err)
	defer func() { _ = late.Rollback() }()
	lateID := f.enqueue(late, pid)
	earlyID := f.enqueue(f.db, pid) // its own transaction, committed
	require.Less(t, lateID, earlyID)
	require.Equal(t, 1, f.move(pid), "the committed message moves")

	// The fence begins with the open writer listed: it cannot move until
	// that transaction ends.
	require.Zero(t, f.fenceBegins(0), "the fence passed an open writer's id")
	f.step()
	safe, _ := f.state(0)
	require.Zero(t, safe, "the fence passed an open writer's id")
	require.Equal(t, 0, f.move(pid))
	_, floor := f.state(pid)
	require.Less(t, floor, lateID, "the floor passed an open writer's id")

	require.NoError(t, late.Commit())
	f.fenceReaches(earlyID)
	require.Equal(t, 1, f.move(pid), "the late message moves")
	var left int
	require.NoError(t, f.db.NewRaw(`SELECT COUNT(*) FROM ? WHERE `+dbtest.IncomingRows, bun.Ident(f.d.Tables().Incoming)).Scan(f.ctx, &left))
	require.Zero(t, left)

	// The next move reads from the fence: every row up to it is moved.
	require.Equal(t, 0, f.move(pid))
	safe, floor = f.state(pid)
	require.Equal(t, earlyID, safe)
	require.Equal(t, earlyID, floor)
}

// TestFloorsPassAReadOnlySnapshot: a read-only transaction that holds a
// read view, however long (the case the floors are for), does not hold
// the fence; and a floor reached under it is read from.
func TestFloorsPassAReadOnlySnapshot(t *testing.T) {
	f := newFloorsFixture(t, dbtest.MySQL(t))
	pid := f.pids[1]

	reader := f.holdReadView()
	var n int
	require.NoError(t, reader.NewRaw(`SELECT COUNT(*) FROM ? WHERE `+dbtest.IncomingRows, bun.Ident(f.d.Tables().Incoming)).Scan(f.ctx, &n))

	var last int64
	for range 3 {
		last = f.enqueue(f.db, pid)
	}
	require.Equal(t, 3, f.move(pid))
	f.fenceReaches(last) // a read-only snapshot does not hold it
	require.Equal(t, 0, f.move(pid))
	_, floor := f.state(pid)
	require.Equal(t, last, floor)

	next := f.enqueue(f.db, pid)
	require.Equal(t, 1, f.move(pid), "a row above the floor moves")
	require.Greater(t, next, last)
}

// TestFloorsOffWithoutProcess: a user without the PROCESS privilege cannot
// list InnoDB's transactions; the floors stay off and moves read from each
// partition's start, as before them.
func TestFloorsOffWithoutProcess(t *testing.T) {
	root := dbtest.MySQL(t)
	ctx := t.Context()
	cfg, err := mysql.ParseDSN(dbtest.MySQLDSN())
	require.NoError(t, err)
	user := fmt.Sprintf("sbnp%d", time.Now().UnixNano()%1_000_000_000)
	_, err = root.ExecContext(ctx, `CREATE USER ?@'%' IDENTIFIED BY 'pw'`, user)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.ExecContext(context.Background(), `DROP USER ?@'%'`, user) })
	_, err = root.ExecContext(ctx, `GRANT ALL ON ?.* TO ?@'%'`, bun.Ident(cfg.DBName), user)
	require.NoError(t, err)
	c := cfg.Clone()
	c.User, c.Passwd = user, "pw"
	sqldb, err := sql.Open("mysql", c.FormatDSN())
	require.NoError(t, err)
	db := bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	t.Cleanup(func() { _ = db.Close() })

	f := newFloorsFixture(t, db)
	pid := f.pids[0]
	f.enqueue(db, pid)
	require.Equal(t, 1, f.move(pid))
	f.d.floors.step.Lock()
	err = f.d.fenceStep(f.ctx)
	f.d.floors.step.Unlock()
	require.ErrorContains(t, err, "PROCESS")
	f.d.floors.next = time.Time{}
	f.d.tick(f.ctx)
	f.d.floors.mu.Lock()
	off := f.d.floors.off
	f.d.floors.mu.Unlock()
	require.True(t, off, "the refused listing turns the floors off")
	f.enqueue(db, pid)
	require.Equal(t, 1, f.move(pid), "moves go on without floors")
}

// TestEnqueueOnAConnIsOneTransaction: on a connection not in a
// transaction, a chunk's body and incoming rows commit together, the
// floors rest on it (floors.go): while the incoming INSERT waits, the body
// row is not committed.
func TestEnqueueOnAConnIsOneTransaction(t *testing.T) {
	t.Parallel()
	f := newFloorsFixture(t, dbtest.MySQL(t))
	conn, err := f.db.Conn(f.ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	var connID int64
	require.NoError(t, conn.NewRaw(`SELECT CONNECTION_ID()`).Scan(f.ctx, &connID))
	locker, err := f.db.Conn(f.ctx)
	require.NoError(t, err)
	defer func() {
		_, _ = locker.ExecContext(context.Background(), `UNLOCK TABLES`) // a pooled session keeps its locks
		_ = locker.Close()
	}()
	_, err = locker.ExecContext(f.ctx, `LOCK TABLES ? WRITE`, bun.Ident(f.d.Tables().Incoming))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		var raw [1][16]byte
		if err := uuidv7.Fill(raw[:], time.Now()); err != nil {
			done <- err
			return
		}
		done <- f.d.MessageInsertMany(f.ctx, &dialect.MessageInsertManyParams{Conn: conn,
			Rows: []dialect.MessageRow{{ID: raw[0], PartitionID: f.pids[0], PayloadType: "t", Payload: []byte("p")}}, ChunkRows: 10, ChunkBytes: 1 << 20})
	}()
	bodies := func() int {
		var n int
		require.NoError(t, f.db.NewRaw(`SELECT COUNT(*) FROM ?`, bun.Ident(f.d.Tables().Body+"_g0")).Scan(f.ctx, &n))
		return n
	}
	for { // until the incoming INSERT waits for the lock, its body written
		var state string
		err := f.db.NewRaw(`SELECT COALESCE(STATE, '') FROM information_schema.PROCESSLIST WHERE ID = ?`, connID).Scan(f.ctx, &state)
		require.NoError(t, err)
		if strings.HasPrefix(state, "Waiting for table") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the enqueue ended without waiting for incoming's lock: %v", err)
		default:
		}
		f.pause("the enqueue never waited for incoming's lock")
	}
	require.Zero(t, bodies(), "the body row was committed before its incoming row")
	_, err = locker.ExecContext(f.ctx, `UNLOCK TABLES`)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, 1, bodies())
	var open int
	require.NoError(t, conn.NewRaw(`SELECT @@in_transaction`).Scan(f.ctx, &open))
	require.Zero(t, open, "the connection was left in a transaction")
}
