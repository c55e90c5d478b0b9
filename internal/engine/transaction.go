// Outbox.Transaction: a transaction on the outbox's database that collects
// the partitions enqueued inside it and wakes the sequencer for them once
// it has committed.

package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
)

type txKey struct{ o *Outbox }

type collector struct {
	mu  sync.Mutex
	ids map[int64]struct{}
}

func (c *collector) add(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.ids[id] = struct{}{}
	}
}

// Transaction runs fn in a transaction on the outbox's database (READ
// COMMITTED on MySQL/MariaDB, as every outbox transaction) and, once it has
// committed, wakes the sequencer for every partition fn enqueued to.
// Enqueue inside fn with the tx it receives. On SQLite the transaction
// queues on the process's single writer and holds it: another write
// transaction started inside fn with its ctx (Transaction, Enqueue on a
// *bun.DB) returns ErrWriterHeld; one started with an unrelated context
// would wait for ever.
func (o *Outbox) Transaction(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", outbox.ErrNilConn)
	}
	col := &collector{ids: make(map[int64]struct{})}
	ctx = context.WithValue(ctx, txKey{o}, col)
	err := o.withWriter(ctx, func(ctx context.Context) error { return o.d.DB().RunInTx(ctx, o.d.TxOptions(), fn) })
	if err != nil {
		return err
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	ids := make([]int64, 0, len(col.ids))
	for id := range col.ids {
		o.prio.MarkDirty(id)
		ids = append(ids, id)
	}
	o.notify.add(ids, nil)
	return nil
}

// Flush wakes the sequencer now for partitions enqueued through caller-owned
// transactions: call it after such a transaction commits for the lowest
// latency (Transaction does this for you).
func (o *Outbox) Flush() { o.prio.Flush() }
