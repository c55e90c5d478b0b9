// Package conformance is seqbox's one behaviour suite: every guarantee
// (docs/ARCHITECTURE.md, "Guarantees and their tests") as a named test, run
// unchanged against PostgreSQL, MariaDB/MySQL and SQLite (see
// conformance_test.go for the wiring).
package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/outbox"
)

// Env is one test's database and table prefix.
type Env struct {
	T      *testing.T
	Ctx    context.Context
	DB     *bun.DB
	Prefix string
	D      dialect.Dialect
}

// Case is one named behaviour.
type Case struct {
	Name string
	Run  func(e *Env)
}

// Run runs every case against db, each with fresh tables.
func Run(t *testing.T, db *bun.DB, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			e := NewEnv(t, db)
			c.Run(e)
		})
	}
}

// NewEnv migrates a fresh prefix and drops it when the test ends.
func NewEnv(t *testing.T, db *bun.DB) *Env {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a failure bound: the torture under -race on a busy 2-core host took over 3
	t.Cleanup(cancel)
	prefix := dbtest.Prefix(t)
	d, err := dialects.Open(context.Background(), db, prefix)
	require.NoError(t, err)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	t.Cleanup(func() {
		_ = d.Release()
		if os.Getenv("SEQBOX_KEEP_TABLES") == "" {
			_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
		}
	})
	return &Env{T: t, Ctx: ctx, DB: db, Prefix: prefix, D: d}
}

// Logger logs through t.Log at warn level and above, so failures show the
// pipeline's complaints without flooding passing runs.
func (e *Env) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{e.T}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// Builder is a builder on this env's tables, tuned for fast tests, with
// wake-ups across processes on PostgreSQL.
func (e *Env) Builder() *seqbox.Builder { return e.BuilderOn(e.DB) }

// TestRotateInterval is the rotation interval of every test's outbox: short,
// so that on PostgreSQL, where the message tables rotate (docs/ROTATION.md),
// every case runs across many rotations.
const TestRotateInterval = 200 * time.Millisecond

// BuilderOn is Builder on db, a handle of this env's database (one with a
// query hook, say).
func (e *Env) BuilderOn(db *bun.DB) *seqbox.Builder {
	return withListener(seqbox.New(db).TablePrefix(e.Prefix).Migrate(true).Logger(e.Logger()).
		PollInterval(50*time.Millisecond).ReconcileInterval(200*time.Millisecond).
		VacuumInterval(100*time.Millisecond).RotateInterval(TestRotateInterval), db)
}

// withListener gives b a wake-up listener on PostgreSQL (the test-only
// pgdriver one); elsewhere there is none to give.
func withListener(b *seqbox.Builder, db *bun.DB) *seqbox.Builder {
	if db.Dialect().Name() == bundialect.PG {
		return b.PostgresOptions(postgres.WithListener(dbtest.PostgresListener(db)))
	}
	return b
}

// Start starts b and stops it at cleanup.
func (e *Env) Start(b *seqbox.Builder) *Outbox {
	ob, err := StartOutbox(e.Ctx, b)
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Stop(ctx)
	})
	return ob
}

// Count returns the rows of a seqbox table ("body", "incoming", …).
func (e *Env) Count(table string) int {
	q := "SELECT COUNT(*) FROM ?"
	if table == "incoming" {
		q += " WHERE " + dbtest.IncomingRows
	}
	var n int
	require.NoError(e.T, e.DB.NewRaw(q, bun.Ident(e.Prefix+table)).Scan(e.Ctx, &n))
	return n
}

// MarkPurged marks partition pid's outgoing row seq purged in tx, as a
// purge's tombstone does. On MariaDB and SQLite outgoing is a view of its
// generations' tables (docs/ROTATION.md), which takes no UPDATE, so each of
// them is updated; the row is in one.
func (e *Env) MarkPurged(tx bun.Tx, pid, seq int64) {
	tables := []string{e.Prefix + "outgoing"}
	if e.D.Name() == dialect.MySQL || e.D.Name() == dialect.SQLite {
		tables = []string{e.Prefix + "outgoing_g0", e.Prefix + "outgoing_g1", e.Prefix + "outgoing_g2"}
	}
	for _, t := range tables {
		_, err := tx.NewRaw("UPDATE ? SET purged = 1 WHERE partition_id = ? AND seq = ?", bun.Ident(t), pid, seq).Exec(e.Ctx)
		require.NoError(e.T, err)
	}
}

// ScratchTable creates a table of this env's prefix plus name with the
// given columns (a handler's effects), dropped when the test ends, and
// returns its name.
func (e *Env) ScratchTable(name, columns string) string {
	table := e.Prefix + name
	_, err := e.DB.NewRaw("CREATE TABLE ? ("+columns+")", bun.Ident(table)).Exec(e.Ctx)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _, _ = e.DB.NewRaw("DROP TABLE IF EXISTS ?", bun.Ident(table)).Exec(context.Background()) })
	return table
}

// Settled waits until ob's vacuum has nothing left to prune and no acked
// row is left for a rotation to truncate (docs/ROTATION.md), and returns
// the row counts, which then stay still while nothing is enqueued: the
// "writes nothing" checks of a pipeline that has just delivered.
func (e *Env) Settled(ob *Outbox) map[string]int {
	e.T.Helper()
	var last map[string]int
	e.Eventually("vacuum to settle", func() bool {
		if n, err := ob.Sweep(e.Ctx); err != nil || n > 0 {
			return false
		}
		var acked int
		require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? o JOIN ? p ON p.partition_id = o.partition_id WHERE o.seq <= p.processed_seq",
			bun.Ident(e.Prefix+"outgoing"), bun.Ident(e.Prefix+"processor")).Scan(e.Ctx, &acked))
		if acked > 0 {
			return false
		}
		now := e.Counts()
		settled := maps.Equal(now, last)
		last = now
		return settled
	})
	return last
}

// Counts returns the row count of every table.
func (e *Env) Counts() map[string]int {
	out := map[string]int{}
	for _, t := range []string{"partitions", "body", "incoming", "outgoing", "processor", "vacuum_counter", "dead_letters", "dedup_keys"} {
		out[t] = e.Count(t)
	}
	return out
}

// waitBound is how long Eventually waits for its condition, and
// EventuallyProgressing for progress: a failure bound, not a timing
// assertion.
const waitBound = 60 * time.Second

// Eventually polls cond until it holds or waitBound passes.
func (e *Env) Eventually(what string, cond func() bool) {
	e.T.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// EventuallyProgressing polls cond until it holds, failing only when
// progress has not moved for waitBound, or the case's
// context ends: for waits whose length grows with the machine's load
// (many rounds of work), where a fixed bound on the whole wait would fail
// a slow run that is still getting on.
func (e *Env) EventuallyProgressing(what string, progress func() int64, cond func() bool) {
	e.T.Helper()
	last, since := progress(), time.Now()
	for !cond() {
		if p := progress(); p != last {
			last, since = p, time.Now()
		}
		if time.Since(since) > waitBound || e.Ctx.Err() != nil {
			e.T.Fatalf("timed out waiting for %s (progress stuck at %d)", what, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Recorder collects deliveries per queue partition, safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	got  map[string][]outbox.MessageID // queue/partition → ids in delivery order
	seqs map[string][]int64
	all  map[outbox.MessageID]int
	n    int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{got: map[string][]outbox.MessageID{}, seqs: map[string][]int64{}, all: map[outbox.MessageID]int{}}
}

func key(queue string, partition int) string { return fmt.Sprintf("%s/%d", queue, partition) }

// Add records one delivery.
func (r *Recorder) Add(queue string, partition int, seq int64, id outbox.MessageID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(queue, partition)
	r.got[k] = append(r.got[k], id)
	r.seqs[k] = append(r.seqs[k], seq)
	r.all[id]++
	r.n++
}

// Len is the number of deliveries, duplicates included.
func (r *Recorder) Len() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }

// Distinct is the number of distinct ids delivered.
func (r *Recorder) Distinct() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.all) }

// IDs returns a partition's delivered ids in order.
func (r *Recorder) IDs(queue string, partition int) []outbox.MessageID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.MessageID(nil), r.got[key(queue, partition)]...)
}

// Seqs returns a partition's delivered seqs in order.
func (r *Recorder) Seqs(queue string, partition int) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seqs[key(queue, partition)]...)
}

// Times returns how often id was delivered.
func (r *Recorder) Times(id outbox.MessageID) int { r.mu.Lock(); defer r.mu.Unlock(); return r.all[id] }
