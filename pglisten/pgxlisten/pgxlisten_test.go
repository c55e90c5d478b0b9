package pgxlisten_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/pglisten/internal/listentest"
	"github.com/seqbox/seqbox/pglisten/pgxlisten"
)

func TestContract(t *testing.T) {
	t.Parallel()
	listentest.Contract(t, listentest.OpenPgx(t), pgxlisten.New(listentest.PostgresDSN()))
}

// The application's *bun.DB may have any driver: pgx's own here, and
// bun's pgdriver.
func TestAcrossOutboxes(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(testing.TB) *bun.DB{"pgx db": listentest.OpenPgx, "pgdriver db": listentest.OpenPgdriver} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			listentest.AcrossOutboxes(t, open(t), pgxlisten.New(listentest.PostgresDSN()))
		})
	}
}

func TestReconnectReconciles(t *testing.T) {
	t.Parallel()
	listentest.ReconnectReconciles(t, listentest.OpenPgx(t), pgxlisten.New(listentest.PostgresDSN()))
}

// TestUnusableConfigStopsAtOnce: what can never connect is reported as
// postgres.ErrNoListener (the outbox logs it and polls), not retried.
func TestUnusableConfigStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, listen := range []postgres.ListenFunc{pgxlisten.New("postgres://host:notaport/db"), pgxlisten.FromConfig(nil)} {
		_, err := listen(t.Context())
		require.ErrorIs(t, err, postgres.ErrNoListener)
	}
}

// BenchmarkWakeupLatency: listentest.WakeupLatency through pgx, the
// outboxes on pgx's database/sql driver.
func BenchmarkWakeupLatency(b *testing.B) {
	for b.Loop() {
		p50, p99, worst := listentest.WakeupLatency(b, listentest.OpenPgx(b), listentest.OpenPgx(b), pgxlisten.New(listentest.PostgresDSN()))
		b.ReportMetric(p50, "p50_ms")
		b.ReportMetric(p99, "p99_ms")
		b.ReportMetric(worst, "max_ms")
	}
}
