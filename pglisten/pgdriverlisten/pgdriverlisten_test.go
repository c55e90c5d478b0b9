package pgdriverlisten_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/pglisten/internal/listentest"
	"github.com/seqbox/seqbox/pglisten/pgdriverlisten"
)

func TestContract(t *testing.T) {
	t.Parallel()
	db := listentest.OpenPgdriver(t)
	listentest.Contract(t, db, pgdriverlisten.New(db))
}

func TestAcrossOutboxes(t *testing.T) {
	t.Parallel()
	db := listentest.OpenPgdriver(t)
	listentest.AcrossOutboxes(t, db, pgdriverlisten.New(db))
}

func TestReconnectReconciles(t *testing.T) {
	t.Parallel()
	db := listentest.OpenPgdriver(t)
	listentest.ReconnectReconciles(t, db, pgdriverlisten.New(db))
}

// TestOtherDriverStopsAtOnce: a *bun.DB of another driver is reported as
// postgres.ErrNoListener (the outbox logs it and polls), not retried.
func TestOtherDriverStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, listen := range []postgres.ListenFunc{pgdriverlisten.New(listentest.OpenPgx(t)), pgdriverlisten.New(nil)} {
		_, err := listen(t.Context())
		require.ErrorIs(t, err, postgres.ErrNoListener)
	}
}

// BenchmarkWakeupLatency: listentest.WakeupLatency through pgdriver.
func BenchmarkWakeupLatency(b *testing.B) {
	for b.Loop() {
		db := listentest.OpenPgdriver(b)
		p50, p99, worst := listentest.WakeupLatency(b, listentest.OpenPgdriver(b), db, pgdriverlisten.New(db))
		b.ReportMetric(p50, "p50_ms")
		b.ReportMetric(p99, "p99_ms")
		b.ReportMetric(worst, "max_ms")
	}
}
