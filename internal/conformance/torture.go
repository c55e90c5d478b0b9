package conformance

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Torture sizes, from the issue: 16 producers × 500 transactions of 1–5
// messages, keys over 8 partitions, 20% rolled back, two consuming instances.
const (
	tortureProducers    = 16
	tortureTransactions = 500
	torturePartitions   = 8
	tortureKeys         = 40
)

// testConcurrencyTorture checks, under concurrent producers with random
// rollbacks and two outbox instances consuming in leased mode: every
// committed message delivered, no rolled-back one, gap-free increasing seqs
// per partition, each producer's per-key order kept, no duplicates, and
// never two handlers on one partition at once.
func testConcurrencyTorture(e *Env) {
	rec := NewRecorder()
	type payloadInfo struct{ producer, counter uint32 }
	var mu sync.Mutex
	info := map[outbox.MessageID]payloadInfo{}
	keyOf := map[outbox.MessageID]string{}
	var inFlight [torturePartitions]atomic.Int32
	var overlap atomic.Int32
	handler := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if inFlight[d.Partition].Add(1) != 1 {
			overlap.Add(1)
		}
		defer inFlight[d.Partition].Add(-1)
		rec.Add(d.Queue, d.Partition, d.Seq, d.ID)
		return nil
	})
	newInstance := func(name string) *Outbox {
		return e.Start(e.Builder().InstanceID(name).Queue("torture", torturePartitions, handler, processor.BatchSize(50)))
	}
	a, b := newInstance("torture-a"), newInstance("torture-b")
	instances := []*Outbox{a, b}

	var committed, rolledBack []outbox.MessageID
	var wg sync.WaitGroup
	for p := range tortureProducers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 42))
			ob := instances[p%2]
			var counter uint32
			for range tortureTransactions {
				n := 1 + rng.IntN(5)
				msgs := make([]outbox.Message, n)
				keys := make([]string, n)
				for i := range msgs {
					counter++
					payload := make([]byte, 8)
					binary.BigEndian.PutUint32(payload, uint32(p))
					binary.BigEndian.PutUint32(payload[4:], counter)
					keys[i] = fmt.Sprint("key-", rng.IntN(tortureKeys))
					msgs[i] = outbox.Message{Key: keys[i], PayloadType: "torture", Payload: payload}
				}
				rollback := rng.IntN(100) < 20
				sleep := time.Duration(rng.IntN(3)) * time.Millisecond
				var ids []outbox.MessageID
				err := ob.Transaction(e.Ctx, func(ctx context.Context, tx bun.Tx) error {
					var err error
					if ids, err = ob.EnqueueBatch(ctx, tx, "torture", msgs); err != nil {
						return err
					}
					time.Sleep(sleep)
					if rollback {
						return errRollback
					}
					return nil
				})
				if rollback {
					require.ErrorIs(e.T, err, errRollback)
				} else {
					require.NoError(e.T, err)
				}
				mu.Lock()
				if rollback {
					rolledBack = append(rolledBack, ids...)
				} else {
					committed = append(committed, ids...)
					for i, id := range ids {
						info[id] = payloadInfo{uint32(p), uint32(i)}
						keyOf[id] = keys[i]
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(e.Ctx, 2*time.Minute)
	defer cancel()
	require.NoError(e.T, a.WaitProcessed(ctx, committed...))
	e.T.Logf("committed %d messages, rolled back %d", len(committed), len(rolledBack))

	require.Zero(e.T, overlap.Load(), "two handlers ran on one partition at once")
	require.Equal(e.T, len(committed), rec.Distinct(), "every committed message delivered")
	require.Equal(e.T, len(committed), rec.Len(), "no message delivered twice")
	for _, id := range committed {
		require.Equal(e.T, 1, rec.Times(id))
	}
	for _, id := range rolledBack {
		require.Zero(e.T, rec.Times(id), "rolled-back message delivered")
	}
	// Per key, one producer's messages arrive in the order it committed them.
	type pk struct {
		producer uint32
		key      string
	}
	for part := range torturePartitions {
		requireGapFree(e, rec, "torture", part)
		lastPos := map[pk]int{}
		pos := map[outbox.MessageID]int{}
		for i, id := range committed {
			pos[id] = i // committed is appended per producer in commit order
		}
		for _, id := range rec.IDs("torture", part) {
			k := pk{info[id].producer, keyOf[id]}
			if last, ok := lastPos[k]; ok {
				require.Greater(e.T, pos[id], last, "producer %d key %s out of order", k.producer, k.key)
			}
			lastPos[k] = pos[id]
		}
	}
	// Storage is bounded: with everything processed, vacuum empties the tables.
	e.Eventually("vacuum to empty the message tables", func() bool {
		return e.Count("body") == 0 && e.Count("outgoing") == 0 && e.Count("incoming") == 0
	})
}
