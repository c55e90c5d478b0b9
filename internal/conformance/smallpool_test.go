package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
)

// TestSmallPoolNoDeadlock: with a pool of 4 connections, processors inside
// their transactions never wait for a second connection (a statement
// prepared on first use inside a transaction once deadlocked the pool).
func TestSmallPoolNoDeadlock(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			db := o.Open(t)
			e := NewEnv(t, db)
			db.SetMaxOpenConns(4)
			createLedgerTables(e)
			ob := e.Start(ledgerQueues(e.Builder(), db, e.Prefix, true))
			var ids []outbox.MessageID
			require.NoError(t, ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
				for i := range 16 {
					for _, q := range ledgerQueueNames {
						id, err := ob.Enqueue(ctx, tx, q, outbox.Message{Key: fmt.Sprintf("k%02d", i), PayloadType: "t"})
						if err != nil {
							return err
						}
						ids = append(ids, id)
					}
				}
				return nil
			}))
			ctx, cancel := context.WithTimeout(e.Ctx, 20*time.Second)
			defer cancel()
			require.NoError(t, ob.WaitProcessed(ctx, ids...))
		})
	}
}
