package conformance

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
)

// A crash worker is this test binary re-run as TestCrashWorkerProcess
// with these variables set; it works until it is SIGKILLed.
const (
	crashWorkerEnv = "SEQBOX_CRASH_WORKER" // "1" in a worker
	crashDBEnv     = "SEQBOX_CRASH_DB"     // postgres, mysql or sqlite
	crashFileEnv   = "SEQBOX_CRASH_SQLITE" // the SQLite database file
	crashPrefixEnv = "SEQBOX_CRASH_PREFIX"
	crashRoleEnv   = "SEQBOX_CRASH_ROLE" // producer, consumer or both
	crashSlotEnv   = "SEQBOX_CRASH_SLOT" // a producer's slot, of crashProducers
	crashSeedEnv   = "SEQBOX_CRASH_SEED"

	crashProducers = 2
	crashConsumers = 2
	crashPhase     = 12 * time.Second // killing and restarting, at least
	crashPhaseMax  = 2 * time.Minute  // and at most, waiting for a delivery and a rotation
	crashPause     = 2 * time.Millisecond
)

// testCrashRestartNothingLost: worker processes are SIGKILLed and
// restarted at random while producers commit and roll back; then a clean
// consumer drains. Every committed message (the ledger) is delivered, no
// rolled-back one, each partition's seqs gap-free and in each key's commit
// order, and the transactional queue's effects exactly once. On servers
// producers and two consumers are separate processes; SQLite allows one
// process per database file, so there one worker does both.
func testCrashRestartNothingLost(e *Env) {
	createLedgerTables(e)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	e.T.Logf("seed %d", seed)
	var workers []*crashWorker
	switch e.D.Name() {
	case dialect.Postgres, dialect.MySQL:
		for slot := range crashProducers {
			workers = append(workers, newCrashWorker(e, "producer", slot, ""))
		}
		for slot := range crashConsumers {
			workers = append(workers, newCrashWorker(e, "consumer", slot, ""))
		}
	case dialect.SQLite:
		workers = append(workers, newCrashWorker(e, "both", 0, sqliteFile(e)))
	default:
		e.T.Fatalf("no crash set-up for dialect %q", e.D.Name())
	}
	for _, w := range workers {
		w.start(rng.Uint64())
	}
	// The kills go on for crashPhase and then until the workers have
	// delivered and (where the tables rotate) truncated a generation
	// between kills: on a slow machine (SQLite under -race) a worker
	// may need several lives to get there, and a case whose kills met
	// no delivery or no rotation proves nothing.
	met := func() bool { return e.Count("delivered") > 0 && (!rotates(e) || truncatedGenerations(e) > 0) }
	kills := 0
	start := time.Now()
	for end := start.Add(crashPhase); time.Now().Before(end) || !met(); kills++ {
		if time.Since(start) > crashPhaseMax {
			e.T.Fatalf("after %v and %d kills the workers had delivered %d messages and truncated %d generations",
				crashPhaseMax, kills, e.Count("delivered"), truncatedGenerations(e))
		}
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		w := workers[rng.IntN(len(workers))]
		w.kill()
		w.start(rng.Uint64())
	}
	for _, w := range workers {
		w.kill()
	}
	e.T.Logf("%d workers, SIGKILLed and restarted %d times in %v", len(workers), kills, time.Since(start).Round(time.Second))

	ob := e.Start(ledgerQueues(e.Builder().InstanceID("final-consumer"), e.DB, e.Prefix, true))
	drainLedger(e, ob)
	require.NoError(e.T, ob.Stop(e.Ctx))
	verifyLedger(e)
}

// crashWorker is one worker slot: a process started, killed and started
// again.
type crashWorker struct {
	e   *Env
	env []string
	cmd *exec.Cmd
	out *dbtest.SyncBuffer
}

func newCrashWorker(e *Env, role string, slot int, file string) *crashWorker {
	w := &crashWorker{e: e, env: []string{
		crashWorkerEnv + "=1", crashDBEnv + "=" + e.D.Name().String(), crashFileEnv + "=" + file,
		crashPrefixEnv + "=" + e.Prefix, crashRoleEnv + "=" + role, crashSlotEnv + "=" + strconv.Itoa(slot),
	}}
	e.T.Cleanup(func() {
		if w.cmd != nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
		if e.T.Failed() && w.out != nil {
			e.T.Logf("last output of worker %v:\n%s", w.env[4:], tail(w.out.String(), 3000))
		}
	})
	return w
}

func (w *crashWorker) start(seed uint64) {
	exe, err := os.Executable()
	require.NoError(w.e.T, err)
	w.out = &dbtest.SyncBuffer{}
	w.cmd = exec.Command(exe, "-test.run=^TestCrashWorkerProcess$", "-test.v", "-test.timeout=5m")
	w.cmd.Env = append(append(os.Environ(), w.env...), crashSeedEnv+"="+strconv.FormatUint(seed, 10))
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	require.NoError(w.e.T, w.cmd.Start())
}

// kill SIGKILLs the worker and fails the test if it had died by itself
// or reported a failure, a panic or a data race before.
func (w *crashWorker) kill() {
	w.e.T.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	_ = w.cmd.Wait()
	st, _ := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
	out := w.out.String()
	w.cmd = nil
	for _, bad := range []string{"--- FAIL", "panic:", "DATA RACE"} {
		if strings.Contains(out, bad) {
			w.e.T.Fatalf("worker %v reported %q:\n%s", w.env, bad, tail(out, 6000))
		}
	}
	if !st.Signaled() || st.Signal() != syscall.SIGKILL {
		w.e.T.Fatalf("worker %v ended by itself (%v) before it was killed:\n%s", w.env, st, tail(out, 6000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// sqliteFile is the file behind e.DB, for a worker process to open.
func sqliteFile(e *Env) string {
	var dbs []struct {
		Name string `bun:"name"`
		File string `bun:"file"`
	}
	require.NoError(e.T, e.DB.NewRaw("SELECT name, file FROM pragma_database_list").Scan(e.Ctx, &dbs))
	for _, d := range dbs {
		if d.Name == "main" && d.File != "" {
			return d.File
		}
	}
	e.T.Fatalf("no file behind the SQLite database: %+v", dbs)
	return ""
}

// runCrashWorker is a worker process's body: start the outbox for its
// role, then produce (or just consume) until killed. It stops by itself
// only if the parent test has gone.
func runCrashWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	go func(parent int) {
		for os.Getppid() == parent {
			time.Sleep(200 * time.Millisecond)
		}
		cancel()
	}(os.Getppid())
	db := openCrashWorkerDB(t)
	prefix, role := os.Getenv(crashPrefixEnv), os.Getenv(crashRoleEnv)
	d, err := dialects.Open(context.Background(), db, prefix)
	require.NoError(t, err)
	e := &Env{T: t, Ctx: ctx, DB: db, Prefix: prefix, D: d}
	ob, err := StartOutbox(ctx, ledgerQueues(e.Builder(), db, prefix, role != "producer"))
	require.NoError(t, err)
	t.Logf("%s worker started", role)
	if role == "consumer" {
		<-ctx.Done()
		return
	}
	slot, err := strconv.Atoi(os.Getenv(crashSlotEnv))
	require.NoError(t, err)
	seed, err := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	require.NoError(t, err)
	producers := crashProducers
	if role == "both" {
		producers = 1
	}
	newLedgerProducer(ob, db, prefix, slot, producers, seed).run(ctx, crashPause)
}

func openCrashWorkerDB(t *testing.T) *bun.DB {
	var db *bun.DB // dbtest's pool size: a worker is an ordinary application process
	switch name := os.Getenv(crashDBEnv); name {
	case "postgres":
		db = dbtest.Postgres(t)
	case "mysql":
		db = dbtest.MySQL(t)
	case "sqlite":
		sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), os.Getenv(crashFileEnv)))
		require.NoError(t, err)
		db = bun.NewDB(sqldb, sqlitedialect.New())
	default:
		t.Fatalf("%s=%q: want postgres, mysql or sqlite", crashDBEnv, name)
	}
	return db
}
