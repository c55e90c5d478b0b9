package conformance

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
)

const (
	faultProducers = 3
	faultPhase     = 10 * time.Second
	faultPause     = 2 * time.Millisecond
)

// testConnectionFaultsNothingLost: while producers and a consumer run in
// this process, every connection they hold is terminated by the server
// every 1–2 s. Producers treat a failed transaction as not committed only
// through the ledger (a commit may succeed and still report an error).
// Afterwards the same outbox delivers every committed message, no
// rolled-back one, gap-free and in order, transactional effects once.
func testConnectionFaultsNothingLost(e *Env) {
	var db *bun.DB
	var kill func() (int, error)
	switch e.D.Name() {
	case dialect.Postgres:
		db, kill = faultyPostgres(e)
	case dialect.MySQL:
		db, kill = faultyMySQL(e)
	case dialect.SQLite:
		e.T.Skip("SQLite is embedded: there is no server connection to terminate")
	default:
		e.T.Fatalf("no way to kill connections on dialect %q", e.D.Name())
	}
	createLedgerTables(e)
	// The errors the faults cause are expected: log only once they stop.
	var level slog.LevelVar
	level.Set(slog.LevelError + 1)
	logger := slog.New(slog.NewTextHandler(testWriter{e.T}, &slog.HandlerOptions{Level: &level}))
	fe := *e // the pipeline and producers use the connections the killer ends
	fe.DB = db

	ctx, stop := context.WithCancel(e.Ctx)
	defer stop()
	var killed, kills int
	var killErr error
	var wg sync.WaitGroup
	wg.Go(func() { // the first kill early, so it may meet Start's migration or registration
		for wait := rand.N(300 * time.Millisecond); killErr == nil && sleepCtx(ctx, wait); wait = time.Second + rand.N(time.Second) {
			var n int
			n, killErr = kill()
			killed, kills = killed+n, kills+1
		}
	})
	ob := e.Start(ledgerQueues(fe.Builder().Logger(logger), db, e.Prefix, true)) // Start retries transient errors itself
	seed := uint64(time.Now().UnixNano())
	producers := make([]*ledgerProducer, faultProducers)
	for slot := range producers {
		producers[slot] = newLedgerProducer(ob, db, e.Prefix, slot, faultProducers, seed)
		wg.Go(func() { producers[slot].run(ctx, faultPause) })
	}
	time.Sleep(faultPhase)
	// and on until a generation was truncated under the faults, where
	// the tables rotate: on a slow machine the first may come later.
	e.EventuallyProgressing("a generation truncated under the faults", func() int64 { return ob.Counters().Delivered },
		func() bool { return !rotates(e) || truncatedGenerations(e) > 0 })
	stop()
	wg.Wait()
	level.Set(slog.LevelWarn)
	require.NoError(e.T, killErr, "the killer's own connection is never killed")
	var committed, rolledBack, failed, messages int
	for _, p := range producers {
		committed, rolledBack, failed, messages = committed+p.committed, rolledBack+p.rolledBack, failed+p.failed, messages+p.messages
	}
	e.T.Logf("%d connections killed in %d rounds; producer transactions: %d committed, %d rolled back, %d failed",
		killed, kills, committed, rolledBack, failed)
	require.Positive(e.T, killed, "the killer found no connection to kill")
	inLedger := e.Count("ledger")
	require.GreaterOrEqual(e.T, inLedger, messages*len(ledgerQueueNames), "a commit reported as done is missing from the ledger")
	e.T.Logf("%d messages committed by transactions that reported an error", inLedger/len(ledgerQueueNames)-messages)

	drainLedger(e, ob)
	require.NoError(e.T, ob.Stop(e.Ctx))
	verifyLedger(e)
}

// faultyPostgres opens the test database under an application name of
// its own, so the killer ends only these connections.
func faultyPostgres(e *Env) (*bun.DB, func() (int, error)) {
	app := "seqbox-faults-" + e.Prefix
	dsn := dbtest.PostgresDSN()
	if !strings.Contains(dsn, "read_timeout") { // as dbtest.Postgres: long lock waits
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "read_timeout=60s"
	}
	db := openFaulty(e, sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn), pgdriver.WithApplicationName(app))), pgdialect.New())
	return db, func() (int, error) {
		var n int
		// MATERIALIZED: the filter runs first, whatever order the planner
		// would give the conditions.
		err := e.DB.NewRaw(`WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = ? AND pid <> pg_backend_pid())
			SELECT COUNT(*) FROM victims WHERE pg_terminate_backend(pid)`, app).Scan(e.Ctx, &n)
		return n, err
	}
}

// faultyMySQL opens the test database through a connector that notes
// each connection's id: MariaDB shows no per-client name to filter on,
// and other tests' connections to the same database must live.
func faultyMySQL(e *Env) (*bun.DB, func() (int, error)) {
	cfg, err := mysql.ParseDSN(dbtest.MySQLDSN())
	require.NoError(e.T, err)
	base, err := mysql.NewConnector(cfg)
	require.NoError(e.T, err)
	c := &trackingConnector{Connector: base, ids: map[int64]bool{}}
	db := openFaulty(e, sql.OpenDB(c), mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	return db, func() (int, error) {
		var live []int64
		ids := c.list()
		if len(ids) > 0 {
			if err := e.DB.NewRaw("SELECT id FROM information_schema.processlist WHERE id IN (?) AND id <> CONNECTION_ID()",
				bun.List(ids)).Scan(e.Ctx, &live); err != nil {
				return 0, err
			}
		}
		c.forget(ids) // closed already, or killed below
		n := 0
		for _, id := range live {
			// Unknown thread id: it closed in the meantime.
			if _, err := e.DB.ExecContext(e.Ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
				n++
			}
		}
		return n, nil
	}
}

func openFaulty(e *Env, sqldb *sql.DB, d schema.Dialect) *bun.DB {
	sqldb.SetMaxOpenConns(24) // as dbtest
	sqldb.SetMaxIdleConns(24)
	db := bun.NewDB(sqldb, d)
	e.T.Cleanup(func() { _ = db.Close() })
	return db
}

// trackingConnector records the server's id of every connection it opens.
type trackingConnector struct {
	driver.Connector
	mu  sync.Mutex
	ids map[int64]bool
}

func (c *trackingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id, err := connectionID(ctx, cn)
	if err != nil {
		_ = cn.Close()
		return nil, err
	}
	c.mu.Lock()
	c.ids[id] = true
	c.mu.Unlock()
	return cn, nil
}

func connectionID(ctx context.Context, cn driver.Conn) (int64, error) {
	q, ok := cn.(driver.QueryerContext)
	if !ok {
		return 0, fmt.Errorf("%T cannot query", cn)
	}
	rows, err := q.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return 0, err
	}
	if b, ok := v[0].([]byte); ok { // the text protocol
		return strconv.ParseInt(string(b), 10, 64)
	}
	return strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
}

func (c *trackingConnector) list() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	return out
}

func (c *trackingConnector) forget(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.ids, id)
	}
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
