package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/vacuum"
)

// rotationTruncations is how many generations the case waits to see
// truncated while producers and the consumer work.
const rotationTruncations = 6

// rotationBacklog is how far the producers may get ahead of the consumer,
// in messages: a generation is truncated once the consumer has acked it,
// so producers that outran it (SQLite's one writer under -race on a loaded
// machine) would leave no generation to truncate within the case's time.
// The lag it allows is the time between truncations: at 300 SQLite under
// -race truncated one generation every 5–6 s, at 100 every 2–3 s.
const rotationBacklog = 100

// testRotationNothingLost: producers commit and roll back while the
// consumer delivers and the message tables rotate every TestRotateInterval
// (docs/ROTATION.md), until generations have been truncated several times
// under the traffic. Every committed message is delivered, no rolled-back
// one, each partition's seqs gap-free and in each key's commit order, the
// transactional queue's effects exactly once; once all is acked, the
// rotation leaves no row behind. Where the database prunes row by row the
// case has nothing to rotate.
func testRotationNothingLost(e *Env) {
	if !rotates(e) {
		e.T.Skipf("%s prunes row by row (no vacuum.Rotator)", e.D.Name())
	}
	createLedgerTables(e)
	ob := e.Start(ledgerQueues(e.Builder(), e.DB, e.Prefix, true))
	ctx, stop := context.WithCancel(e.Ctx)
	defer stop()
	seed := uint64(time.Now().UnixNano())
	e.T.Logf("seed %d", seed)
	const producers = 3
	var wg sync.WaitGroup
	var sent atomic.Int64
	behind := func() bool { return sent.Load()-ob.Counters().Delivered > rotationBacklog }
	for slot := range producers {
		p := newLedgerProducer(ob, e.DB, e.Prefix, slot, producers, seed)
		p.sent, p.held = &sent, behind
		wg.Go(func() { p.run(ctx, 2*time.Millisecond) })
	}
	truncated := func() int64 { return ob.Counters().GenerationsTruncated }
	e.EventuallyProgressing("generations truncated under traffic", truncated, func() bool {
		return truncated() >= rotationTruncations
	})
	stop()
	wg.Wait()
	drainLedger(e, ob)
	e.Eventually("every generation truncated or pruned", func() bool {
		return e.Count("outgoing") == 0 && e.Count("body") == 0
	})
	c := ob.Counters()
	e.T.Logf("%d messages delivered; %d generations truncated, %d messages pruned row by row", c.Delivered, c.GenerationsTruncated, c.Vacuumed)
	require.NoError(e.T, ob.Stop(e.Ctx))
	verifyLedger(e)
}

// rotates reports whether the database rotates its message tables.
func rotates(e *Env) bool {
	_, ok := e.D.(vacuum.Rotator)
	return ok
}

// truncatedGenerations is how many generations have been truncated so
// far; 0 where the database prunes row by row (no vacuum.Rotator).
func truncatedGenerations(e *Env) int {
	e.T.Helper()
	if !rotates(e) {
		return 0
	}
	var n int
	require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? WHERE truncated_at IS NOT NULL",
		bun.Ident(e.Prefix+"generations")).Scan(e.Ctx, &n))
	return n
}
