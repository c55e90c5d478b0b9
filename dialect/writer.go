package dialect

import (
	"context"
	"sync/atomic"

	"github.com/seqbox/seqbox/outbox"
	"github.com/uptrace/bun"
)

// ErrWriterHeld is returned, on a database with one writer (SingleWriter),
// for a write transaction started with the context of one of the outbox's
// own transactions (a transactional handler's, Outbox.Transaction's fn):
// that transaction holds the process's writer, so the write would wait for
// itself for ever. Write through the tx you were given instead.
var ErrWriterHeld = outbox.ErrWriterHeld

// writerKey keys the mark per database: a chain that holds one database's
// writer may still write to another.
type writerKey struct{ db *bun.DB }

// writerHold is cleared when the transaction ends, so a context kept past
// it (by a goroutine, say) no longer counts as holding the writer.
type writerHold struct{ held atomic.Bool }

// HoldWriter returns ctx marked as holding db's single writer, for the
// calls made under it, and the release that clears the mark. Whoever takes
// LockWriter for a transaction that runs code with the context marks it.
func HoldWriter(ctx context.Context, db *bun.DB) (context.Context, func()) {
	h := &writerHold{}
	h.held.Store(true)
	return context.WithValue(ctx, writerKey{db}, h), func() { h.held.Store(false) }
}

// WriterHeld reports whether ctx comes from a transaction that holds db's
// single writer now (HoldWriter). It cannot see a chain that dropped its
// context: a write made with context.Background() from inside still waits.
func WriterHeld(ctx context.Context, db *bun.DB) bool {
	h, ok := ctx.Value(writerKey{db}).(*writerHold)
	return ok && h.held.Load()
}
