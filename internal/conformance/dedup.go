package conformance

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// shortDedupWindow is the "short" queue's window: long enough that two
// enqueues in a row fall inside it on a loaded CI machine under -race (a
// 300 ms window once expired between them), short enough to wait out.
const shortDedupWindow = time.Second

// testDedupKeys: a message whose DedupKey was enqueued to its queue within
// the window is not written; the enqueue returns the first message's id
// and says it was a duplicate. Within a batch a repeated key is a
// duplicate of its first occurrence. Keys are per queue, messages without
// one are never affected, a rolled-back claim leaves nothing, an expired
// key is taken over in place, and the vacuum prunes expired keys. Bad keys
// and windows are refused and write nothing.
func testDedupKeys(e *Env) {
	rec := NewRecorder()
	handler := func(queue string) processor.Handler {
		return processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			rec.Add(queue, d.Partition, d.Seq, d.ID)
			return nil
		})
	}
	ob := e.Start(e.Builder().
		Queue("orders", 4, handler("orders")).
		Queue("audit", 2, handler("audit")).
		Queue("short", 2, handler("short"), processor.DedupWindow(shortDedupWindow)))
	msg := func(key, payload string) outbox.Message {
		return outbox.Message{Key: "customer-1", DedupKey: key, PayloadType: "t", Payload: []byte(payload)}
	}
	enqueue := func(queue string, m outbox.Message) outbox.Enqueued {
		e.T.Helper()
		res, err := ob.EnqueueResult(e.Ctx, e.DB, queue, m)
		require.NoError(e.T, err)
		return res
	}

	first := enqueue("orders", msg("order-1", "a"))
	require.False(e.T, first.Duplicate)
	again := enqueue("orders", msg("order-1", "a, again"))
	require.Equal(e.T, outbox.Enqueued{ID: first.ID, Duplicate: true}, again, "the first message's id")
	id, err := ob.Enqueue(e.Ctx, e.DB, "orders", msg("order-1", "a, once more"))
	require.NoError(e.T, err)
	require.Equal(e.T, first.ID, id, "Enqueue returns the first id too")
	other := enqueue("audit", msg("order-1", "a"))
	require.False(e.T, other.Duplicate, "keys are per queue")

	batch, err := ob.EnqueueBatchResult(e.Ctx, e.DB, "orders", []outbox.Message{
		msg("b", "b"), msg("c", "c"), msg("b", "b2"), msg("", "plain"), msg("", "plain"), msg("order-1", "a4"),
	})
	require.NoError(e.T, err)
	require.False(e.T, batch[0].Duplicate)
	require.False(e.T, batch[1].Duplicate)
	require.Equal(e.T, outbox.Enqueued{ID: batch[0].ID, Duplicate: true}, batch[2], "a duplicate of its first occurrence")
	require.False(e.T, batch[3].Duplicate, "no key, never a duplicate")
	require.False(e.T, batch[4].Duplicate)
	require.NotEqual(e.T, batch[3].ID, batch[4].ID)
	require.Equal(e.T, outbox.Enqueued{ID: first.ID, Duplicate: true}, batch[5])

	// A claim rolled back with its transaction leaves the key free.
	tx, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	rolled, err := ob.EnqueueResult(e.Ctx, tx, "orders", msg("rb", "rolled back"))
	require.NoError(e.T, err)
	require.NoError(e.T, tx.Rollback())
	kept := enqueue("orders", msg("rb", "kept"))
	require.False(e.T, kept.Duplicate)
	require.NotEqual(e.T, rolled.ID, kept.ID)

	written := []outbox.MessageID{first.ID, other.ID, batch[0].ID, batch[1].ID, batch[3].ID, batch[4].ID, kept.ID}
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, written...))
	require.Equal(e.T, len(written), rec.Distinct(), "each written message delivered, no duplicate written")
	c := ob.Counters()
	require.Equal(e.T, int64(8), c.Enqueued, "rolled-back write included")
	require.Equal(e.T, int64(4), c.Duplicates)

	// An expired key is taken over in place; the vacuum prunes the rest.
	old := enqueue("short", msg("s1", "x"))
	enqueue("short", msg("s2", "x"))
	require.True(e.T, enqueue("short", msg("s1", "y")).Duplicate)
	keys := e.Count("dedup_keys")
	time.Sleep(shortDedupWindow + 200*time.Millisecond) // past the window by the database clock
	taken := enqueue("short", msg("s1", "z"))
	require.False(e.T, taken.Duplicate, "expired: taken over")
	require.NotEqual(e.T, old.ID, taken.ID)
	require.Equal(e.T, outbox.Enqueued{ID: taken.ID, Duplicate: true}, enqueue("short", msg("s1", "w")), "the new holder")
	e.Eventually("expired s2 pruned", func() bool {
		_, err := ob.Sweep(e.Ctx)
		require.NoError(e.T, err)
		return e.Count("dedup_keys") <= keys-1
	})
	require.Positive(e.T, ob.Counters().DedupKeysExpired)

	// Bad input: a typed error, nothing written. The short queue's keys
	// expire meanwhile on a slow machine, and the vacuum prunes them, so
	// dedup_keys is compared without them: the refused batch is to
	// orders, whose window is the default.
	withoutShort := func(counts map[string]int) map[string]int {
		var n int
		require.NoError(e.T, e.DB.NewRaw("SELECT COUNT(*) FROM ? WHERE queue <> ?", bun.Ident(e.Prefix+"dedup_keys"), "short").Scan(e.Ctx, &n))
		counts["dedup_keys"] = n
		return counts
	}
	before := withoutShort(e.Settled(ob))
	for _, bad := range []string{strings.Repeat("k", outbox.MaxDedupKeyLen+1), "bad\xffutf8"} {
		_, err := ob.EnqueueBatch(e.Ctx, e.DB, "orders", []outbox.Message{msg("fine", "f"), msg(bad, "b")})
		require.ErrorIs(e.T, err, outbox.ErrInvalidDedupKey)
		var me *outbox.MessageError
		require.True(e.T, errors.As(err, &me))
		require.Equal(e.T, 1, me.Index)
	}
	require.Equal(e.T, before, withoutShort(e.Counts()), "a refused batch writes nothing, its valid keys included")
	_, err = e.Builder().TablePrefix(e.Prefix).Queue("neg", 1, nil, processor.DedupWindow(-time.Second)).Start(e.Ctx)
	require.ErrorIs(e.T, err, processor.ErrInvalidOptions)
}

// testDedupRace: two transactions enqueue one key at once. The second
// waits for the first; when the first commits it gets the first id as a
// duplicate, and when the first rolls back it writes its own message
// (PostgreSQL, InnoDB). SQLite has one writer, so the second starts after
// the first has ended, with the same outcomes.
func testDedupRace(e *Env) {
	rec := NewRecorder()
	ob := e.Start(e.Builder().Queue("race", 2, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		rec.Add("race", d.Partition, d.Seq, d.ID)
		return nil
	})))
	msg := func(key string) outbox.Message {
		return outbox.Message{DedupKey: key, PayloadType: "t", Payload: []byte(key)}
	}
	serial := e.D.Features().Has(dialect.SingleWriter)
	race := func(key string, commitFirst bool) (first, second outbox.Enqueued) {
		tx1, err := e.DB.BeginTx(e.Ctx, nil)
		require.NoError(e.T, err)
		// A failure below leaves tx1 open; its locks would hold the
		// cleanup's DROP TABLE forever (a hang instead of a failure).
		// Cleanups run last first: this one before the env's drop.
		e.T.Cleanup(func() { _ = tx1.Rollback() })
		first, err = ob.EnqueueResult(e.Ctx, tx1, "race", msg(key))
		require.NoError(e.T, err)
		end := func() {
			if commitFirst {
				require.NoError(e.T, tx1.Commit())
			} else {
				require.NoError(e.T, tx1.Rollback())
			}
		}
		if serial {
			end()
		}
		type outcome struct {
			res outbox.Enqueued
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			tx2, err := e.DB.BeginTx(e.Ctx, &sql.TxOptions{})
			if err != nil {
				done <- outcome{err: err}
				return
			}
			res, err := ob.EnqueueResult(e.Ctx, tx2, "race", msg(key))
			if err == nil {
				err = tx2.Commit()
			} else {
				_ = tx2.Rollback()
			}
			done <- outcome{res, err}
		}()
		if !serial {
			select {
			case o := <-done:
				e.T.Fatalf("the second claim of %q returned (%+v, %v) while the first was open: it must wait", key, o.res, o.err)
			case <-time.After(300 * time.Millisecond):
			}
			end()
		}
		o := <-done
		require.NoError(e.T, o.err)
		return first, o.res
	}

	won, lost := race("k-commit", true)
	require.Equal(e.T, outbox.Enqueued{ID: won.ID, Duplicate: true}, lost, "the winner committed: its id")
	gone, own := race("k-rollback", false)
	require.False(e.T, own.Duplicate, "the winner rolled back: the second writes its own")
	require.NotEqual(e.T, gone.ID, own.ID)

	require.NoError(e.T, ob.WaitProcessed(e.Ctx, won.ID, own.ID))
	require.Equal(e.T, 2, rec.Len(), "one message per key delivered, once")
	require.Equal(e.T, 1, rec.Times(won.ID))
	require.Equal(e.T, 1, rec.Times(own.ID))
}

// testEnqueueHeadersHook: Config.EnqueueHeaders adds its headers to every
// message of a call that does not set them itself, leaves the caller's
// maps alone, and a hook that panics costs its headers, not the enqueue.
func testEnqueueHeadersHook(e *Env) {
	var mu sync.Mutex
	got := map[outbox.MessageID]map[string]string{}
	ob := e.Start(e.Builder().
		EnqueueHeaders(func(ctx context.Context, queue string) map[string]string {
			if ctx.Value(panicKey{}) != nil {
				panic("hook bug")
			}
			return map[string]string{"traceparent": "00-" + queue, "tenant": "from-hook"}
		}).
		Queue("hooked", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			got[d.ID] = d.Headers
			return nil
		})))
	own := map[string]string{"tenant": "42"}
	ids, err := ob.EnqueueBatch(e.Ctx, e.DB, "hooked", []outbox.Message{
		{PayloadType: "t", Headers: own}, {PayloadType: "t"},
	})
	require.NoError(e.T, err)
	panicking, err := ob.Enqueue(context.WithValue(e.Ctx, panicKey{}, true), e.DB, "hooked", outbox.Message{PayloadType: "t"})
	require.NoError(e.T, err, "a panicking hook costs its headers, not the enqueue")
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, append(ids, panicking)...))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(e.T, map[string]string{"traceparent": "00-hooked", "tenant": "42"}, got[ids[0]], "the message's own header wins")
	require.Equal(e.T, map[string]string{"traceparent": "00-hooked", "tenant": "from-hook"}, got[ids[1]])
	require.Empty(e.T, got[panicking])
	require.Equal(e.T, map[string]string{"tenant": "42"}, own, "the caller's map is not changed")
}

type panicKey struct{}
