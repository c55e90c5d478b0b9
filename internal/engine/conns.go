package engine

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/seqbox/seqbox/internal/lifecycle"
)

// connWatch warns when the application's connection pool closes
// connections for want of an idle slot while seqbox works: each is opened
// again at its next use, and seqbox's prepared statements are prepared
// again on it. database/sql keeps 2 idle connections unless told
// otherwise, and seqbox's own work alone holds more at once (up to
// 8 × Concurrency group steps, the sequencer's workers, the vacuum). On
// PostgreSQL that default cut a sustained run from 21–23k to 8.6–8.9k msgs/s
// (BENCHMARKS.md, "A pool's start"). It warns once per outbox.
type connWatch struct {
	db     *sql.DB
	log    *slog.Logger
	last   int64 // sql.DBStats.MaxIdleClosed at the last check
	warned bool
}

const (
	// connWatchInterval is how often the pool's counters are read.
	connWatchInterval = 10 * time.Second
	// connWatchLimit is how many connections one interval may close for
	// want of an idle slot before the watch warns: a burst now and then
	// is the pool doing its job; a reconnect every other second is not.
	connWatchLimit = 20
)

func newConnWatch(db *sql.DB, log *slog.Logger) *connWatch {
	return &connWatch{db: db, log: log, last: db.Stats().MaxIdleClosed}
}

// run checks every connWatchInterval until stopping closes or ctx ends.
func (w *connWatch) run(ctx context.Context, stopping <-chan struct{}) {
	waitCtx, cancel := lifecycle.UntilStopping(ctx, stopping)
	defer cancel()
	for !w.warned && lifecycle.Sleep(waitCtx, connWatchInterval) {
		w.check()
	}
}

// check reads the counters once and warns if the interval closed too many.
func (w *connWatch) check() {
	s := w.db.Stats()
	closed := s.MaxIdleClosed - w.last
	w.last = s.MaxIdleClosed
	if closed <= connWatchLimit || w.warned {
		return
	}
	w.warned = true
	w.log.Warn("the connection pool keeps too few idle connections: seqbox reconnects and prepares its statements again; "+
		"call db.SetMaxIdleConns with the value given to SetMaxOpenConns",
		slog.Int64("closed_for_idle_limit", closed), slog.Duration("within", connWatchInterval),
		slog.Int("max_open", s.MaxOpenConnections), slog.Int("open", s.OpenConnections))
}
