package engine

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// TestStoppedWaitsForReconcileAfterListening: the scan a listener starts
// when it (re)connects is one of the outbox's tasks, so Stopped is closed
// only once it has returned. synctest runs the pipeline on a fake database
// until every goroutine waits: the scan, blocked in the fake, is then the
// only thing that could still run.
func TestStoppedWaitsForReconcileAfterListening(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &listeningDialect{entered: make(chan struct{}), release: make(chan struct{})}
		ob, err := Start(t.Context(), d, Config{Logger: failOnLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		<-d.entered
		stopCtx, cancel := context.WithCancel(t.Context())
		cancel() // Stop returns at once; Stopped says when the tasks are done
		_ = ob.Stop(stopCtx)
		synctest.Wait()
		select {
		case <-ob.Stopped():
			t.Error("Stopped closed while the reconcile scan started by the listener was still running")
		default:
		}
		close(d.release)
		synctest.Wait()
		select {
		case <-ob.Stopped():
		default:
			t.Error("Stopped not closed once every task has returned")
		}
	})
}

// failOnLog is a logger that fails the test on a warning or an error: a
// task that met a method the fake does not have, say.
func failOnLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testErrorWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testErrorWriter struct{ t *testing.T }

func (w testErrorWriter) Write(p []byte) (int, error) {
	w.t.Error(string(p))
	return len(p), nil
}

// listeningDialect is a database with nothing in it and a listener that
// connects once. The reconcile scan that the outbox runs because the
// listener connected blocks until release, whatever its context says (a
// statement the driver has not given back yet).
type listeningDialect struct {
	dialect.Dialect // not implemented: a call panics
	entered         chan struct{}
	release         chan struct{}

	mu        sync.Mutex
	listenCtx context.Context
}

// DB: no database behind this fake (the connection watch is skipped).
func (*listeningDialect) DB() *bun.DB { return nil }

var _ dialect.WakeupListener = (*listeningDialect)(nil)

func (d *listeningDialect) Name() dialect.Name        { return dialect.SQLite }
func (d *listeningDialect) Features() dialect.Feature { return 0 }
func (d *listeningDialect) Tuning() dialect.Tuning {
	return dialect.Tuning{SequencerWorkers: 1, VacuumWorkers: 1}
}
func (d *listeningDialect) IsRetryable(err error) bool    { return false }
func (d *listeningDialect) Prepare(context.Context) error { return nil }
func (d *listeningDialect) Release() error                { return nil }
func (d *listeningDialect) IsTransient(err error) bool    { return false }
func (d *listeningDialect) Limits() dialect.Limits {
	return dialect.Limits{MaxPayloadBytes: 1 << 20, MaxStatementBytes: 16 << 20}
}

func (d *listeningDialect) VacuumCounterList(context.Context, *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error) {
	return nil, nil
}

func (d *listeningDialect) DedupExpire(context.Context, *dialect.DedupExpireParams) (int, error) {
	return 0, nil
}

func (d *listeningDialect) ListenWakeups(ctx context.Context, _ string, w dialect.Wakeups) error {
	d.mu.Lock()
	d.listenCtx = ctx
	d.mu.Unlock()
	w.Listening()
	<-ctx.Done()
	return nil
}

func (d *listeningDialect) IncomingPartitionList(ctx context.Context, _ *dialect.IncomingPartitionListParams) ([]int64, error) {
	d.mu.Lock()
	fromListener := ctx == d.listenCtx
	d.mu.Unlock()
	if fromListener {
		close(d.entered)
		<-d.release
	}
	return nil, nil
}
