package dialecttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// testMessageInsertMany: rows in order, in chunks, on the caller's
// connection, every field stored.
func testMessageInsertMany(t *testing.T, open Open) {
	e := newEnv(t, open)
	ins := func(conn bun.IConn, rs []dialect.MessageRow, chunkRows, chunkBytes int) error {
		return e.d.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: conn, Rows: rs, ChunkRows: chunkRows, ChunkBytes: chunkBytes})
	}
	t.Run("NoRows", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("an enqueue of nothing", func() {
			require.NoError(t, ins(e.db, nil, 10, 1<<20))
			require.NoError(t, ins(e.db, []dialect.MessageRow{}, 10, 1<<20))
		})
	})
	t.Run("Fields", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(1)
		rs := rows(pids[0], 3)
		rs[0].Key, rs[0].Headers = "k\x00ey", []byte(`{"h":"v"}`)
		rs[1].Payload = []byte{0, 1, 2, 255, '\'', '"', '\\'}
		rs[2].PayloadType, rs[2].Payload = "other/type", []byte{}
		require.NoError(t, ins(e.db, rs, 10, 1<<20))
		require.Equal(t, 3, e.incoming(pids[0]))
		e.moveAll(pids[0])
		got, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pids[0], Limit: 10})
		require.NoError(t, err)
		require.Len(t, got, 3)
		for i, m := range got {
			require.Equal(t, int64(i+1), m.Seq)
			require.Equal(t, rs[i].ID, m.ID)
			require.Equal(t, rs[i].Key, m.Key)
			require.Equal(t, rs[i].PayloadType, m.PayloadType)
			require.Equal(t, string(rs[i].Payload), string(m.Payload))
			require.Equal(t, string(rs[i].Headers), string(m.Headers))
			require.False(t, m.Purged)
			require.False(t, m.CreatedAt.IsZero())
		}
	})
	t.Run("Chunks", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		// Interleaved partitions, in chunks of one row and of a few bytes:
		// each partition's line keeps the order given.
		var rs []dialect.MessageRow
		for i := range 7 {
			rs = append(rs, rows(pids[i%2], 1)...)
		}
		for _, c := range []struct{ rows, bytes int }{{1, 1 << 20}, {3, 1 << 20}, {100, 1}} {
			require.NoError(t, ins(e.db, rs, c.rows, c.bytes))
			e.moveAll(pids...)
			// Ids are the body's primary key: a new set for the next round.
			for i := range rs {
				rs[i].ID = newIDs(1)[0]
			}
		}
		for _, pid := range pids {
			got := e.outgoingIDs(pid)
			require.Len(t, got, 3*map[int64]int{pids[0]: 4, pids[1]: 3}[pid])
		}
		// The order: the last round's ids were replaced, so check a fresh one.
		fresh := rows(pids[0], 5)
		before := len(e.outgoing(pids[0]))
		require.NoError(t, ins(e.db, fresh, 2, 1<<20))
		e.moveAll(pids[0])
		require.Equal(t, idsOf(fresh), e.outgoingIDs(pids[0])[before:], "FIFO across chunks")
	})
	t.Run("CallersTransaction", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		before := e.incoming(pids[1])
		require.NoError(t, ins(tx, rows(pids[1], 2), 10, 1<<20))
		require.NoError(t, tx.Rollback())
		require.Equal(t, before, e.incoming(pids[1]), "written on the caller's transaction, rolled back with it")
	})
}

// testMessagePendingList: committed and not yet acked.
func testMessagePendingList(t *testing.T, open Open) {
	e := newEnv(t, open)
	pid := e.queue(1)[0]
	pending := func(ids ...dialect.MessageID) []dialect.MessageID {
		out, err := e.d.MessagePendingList(e.ctx, &dialect.MessagePendingListParams{IDs: ids})
		require.NoError(t, err)
		return out
	}
	t.Run("Empty", func(t *testing.T) {
		require.Empty(t, pending())
		require.Empty(t, pending(newIDs(2)...), "unknown ids")
	})
	t.Run("States", func(t *testing.T) {
		e := e.with(t)
		seq := e.enqueue(pid, 3) // sequenced: 1 acked, 2 and 3 not
		e.moveAll(pid)
		in := e.enqueue(pid, 1) // incoming
		require.True(t, e.lease(pid, "o", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", 1, nil)))
		unknown := newIDs(1)
		got := pending(seq[0], seq[1], seq[2], in[0], unknown[0])
		require.ElementsMatch(t, []dialect.MessageID{seq[1], seq[2], in[0]}, got)

		if e.multiProcess() {
			tx, err := e.db.BeginTx(e.ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			rs := rows(pid, 1)
			require.NoError(t, e.d.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rs, ChunkRows: 10, ChunkBytes: 1 << 20}))
			require.Empty(t, pending(rs[0].ID), "not committed")
		}

		// Acked and vacuumed: the body is gone.
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "", 3, nil)))
		n, err := e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: []dialect.VacuumRange{{PartitionID: pid, FromSeq: 0, ToSeq: 3}}})
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, []dialect.MessageID{in[0]}, pending(append(seq, in[0])...))
	})
	t.Run("ManyIDs", func(t *testing.T) {
		e := e.with(t)
		ids := e.enqueue(pid, 5)
		ask := append(newIDs(2500), ids...) // more than one statement's list
		require.ElementsMatch(t, ids, pending(ask...))
	})
}

// testDedupClaim: a new key, a duplicate within its window, an expired key
// taken over, on the caller's connection.
func testDedupClaim(t *testing.T, open Open) {
	e := newEnv(t, open)
	claim := func(conn bun.IConn, queue string, window time.Duration, cs ...dialect.DedupClaim) []dialect.MessageID {
		out, err := e.d.DedupClaim(e.ctx, &dialect.DedupClaimParams{Conn: conn, Queue: queue, Window: window, Claims: cs})
		require.NoError(t, err)
		require.Len(t, out, len(cs))
		return out
	}
	type keyRow struct {
		MessageID []byte    `bun:"message_id"`
		ExpiresAt time.Time `bun:"expires_at"`
	}
	row := func(queue, key string) (keyRow, bool) {
		var rs []keyRow
		require.NoError(t, e.db.NewRaw("SELECT message_id, expires_at FROM ? WHERE queue = ? AND dedup_key = ?",
			bun.Ident(e.tb.DedupKeys), queue, []byte(key)).Scan(e.ctx, &rs))
		if len(rs) == 0 {
			return keyRow{}, false
		}
		return rs[0], true
	}
	t.Run("NoClaims", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("no claims", func() {
			require.Empty(t, claim(e.db, "q", time.Hour))
		})
	})
	t.Run("NewDuplicateExpired", func(t *testing.T) {
		e := e.with(t)
		ids := newIDs(6)
		from := e.now()
		got := claim(e.db, "q", time.Hour, dialect.DedupClaim{Key: "b", ID: ids[0]}, dialect.DedupClaim{Key: "a", ID: ids[1]})
		to := e.now()
		require.Equal(t, []dialect.MessageID{ids[0], ids[1]}, got, "new keys: the claims' own ids, in the order given")
		r, ok := row("q", "b")
		require.True(t, ok)
		require.Equal(t, ids[0][:], r.MessageID)
		require.WithinRange(t, r.ExpiresAt.UTC(), from.Add(time.Hour-time.Second), to.Add(time.Hour+time.Second))

		// Within the window: the holder's id; the row stays the holder's.
		got = claim(e.db, "q", time.Hour, dialect.DedupClaim{Key: "c", ID: ids[2]}, dialect.DedupClaim{Key: "b", ID: ids[3]})
		require.Equal(t, []dialect.MessageID{ids[2], ids[0]}, got)
		r2, _ := row("q", "b")
		require.Equal(t, r, r2)

		// Another queue's key of the same name is another key.
		require.Equal(t, []dialect.MessageID{ids[4]}, claim(e.db, "other", time.Hour, dialect.DedupClaim{Key: "b", ID: ids[4]}))

		// Expired: taken over in place, with the new window.
		_, err := e.db.NewRaw("UPDATE ? SET expires_at = ? WHERE queue = ? AND dedup_key = ?", bun.Ident(e.tb.DedupKeys), past, "q", []byte("b")).Exec(e.ctx)
		require.NoError(t, err)
		from = e.now()
		got = claim(e.db, "q", 2*time.Hour, dialect.DedupClaim{Key: "a", ID: ids[5]}, dialect.DedupClaim{Key: "b", ID: ids[5]})
		require.Equal(t, []dialect.MessageID{ids[1], ids[5]}, got)
		r3, _ := row("q", "b")
		require.Equal(t, ids[5][:], r3.MessageID)
		require.True(t, r3.ExpiresAt.UTC().After(from.Add(2*time.Hour-time.Second)), "the taker's window")
		require.Equal(t, 1, e.count(e.tb.DedupKeys, "queue = ? AND dedup_key = ?", "q", []byte("b")))
	})
	t.Run("CallersTransaction", func(t *testing.T) {
		e := e.with(t)
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		id := newIDs(1)[0]
		require.Equal(t, []dialect.MessageID{id}, claim(tx, "tx", time.Hour, dialect.DedupClaim{Key: "k", ID: id}))
		require.NoError(t, tx.Rollback())
		_, ok := row("tx", "k")
		require.False(t, ok, "rolled back with the caller's transaction")
	})
	t.Run("WaitsForUncommittedClaim", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		ids := newIDs(2)
		var wg sync.WaitGroup
		defer wg.Wait() // after the rollback below, on a failure
		tx, err := e.db.BeginTx(e.ctx, e.d.TxOptions())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		require.Equal(t, []dialect.MessageID{ids[0]}, claim(tx, "race", time.Hour, dialect.DedupClaim{Key: "k", ID: ids[0]}))
		done := make(chan []dialect.MessageID, 1)
		wg.Go(func() {
			out, err := e.d.DedupClaim(e.ctx, &dialect.DedupClaimParams{Conn: e.db, Queue: "race", Window: time.Hour,
				Claims: []dialect.DedupClaim{{Key: "k", ID: ids[1]}}})
			if err != nil {
				t.Errorf("racing claim: %v", err)
			}
			done <- out
		})
		e.waitBlocked(e.tb.DedupKeys)
		select {
		case <-done:
			t.Fatal("the racing claim did not wait for the uncommitted one")
		default:
		}
		require.NoError(t, tx.Commit())
		require.Equal(t, []dialect.MessageID{ids[0]}, <-done, "the committed claim holds the key")
	})
}

// testDedupExpire: up to Limit expired keys go, unexpired ones stay.
func testDedupExpire(t *testing.T, open Open) {
	e := newEnv(t, open)
	expire := func(limit int) int {
		n, err := e.d.DedupExpire(e.ctx, &dialect.DedupExpireParams{Limit: limit})
		require.NoError(t, err)
		return n
	}
	e.unchanged("an expiry with no keys", func() { require.Zero(t, expire(10)) })
	ids := newIDs(3)
	_, err := e.d.DedupClaim(e.ctx, &dialect.DedupClaimParams{Conn: e.db, Queue: "q", Window: time.Hour, Claims: []dialect.DedupClaim{
		{Key: "a", ID: ids[0]}, {Key: "b", ID: ids[1]}, {Key: "c", ID: ids[2]}}})
	require.NoError(t, err)
	e.unchanged("an expiry with nothing expired", func() { require.Zero(t, expire(10)) })
	_, err = e.db.NewRaw("UPDATE ? SET expires_at = ? WHERE dedup_key IN (?)", bun.Ident(e.tb.DedupKeys), past, bun.List([][]byte{[]byte("a"), []byte("b")})).Exec(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, expire(1), "up to Limit")
	require.Equal(t, 2, e.count(e.tb.DedupKeys, ""))
	require.Equal(t, 1, expire(10))
	require.Zero(t, expire(10))
	require.Equal(t, 1, e.count(e.tb.DedupKeys, "dedup_key = ?", []byte("c")), "the unexpired key stays")
}

// waitBlocked waits until a session of the test database waits for a row
// lock in a statement on table: the state a case must reach before it
// releases the lock, observed rather than slept for.
func (e *env) waitBlocked(table string) {
	e.t.Helper()
	var q, diag string
	every := 5 * time.Millisecond
	switch e.d.Name() {
	case dialect.Postgres:
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND state = 'active' AND query LIKE ?"
		diag = "SELECT concat_ws(' ', state, wait_event_type, query) FROM pg_stat_activity"
	case dialect.MySQL:
		q = "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?"
		// The process list as well: a statement waiting for a metadata
		// lock, or not yet sent, is no InnoDB transaction.
		diag = `SELECT CONCAT_WS(' ', 'trx', trx_state, trx_query) FROM information_schema.innodb_trx
UNION ALL SELECT CONCAT_WS(' ', 'process', command, state, info) FROM information_schema.processlist WHERE db = DATABASE()`
		// InnoDB refreshes what innodb_trx shows only when it has not been
		// read for 100 ms: a faster poll would see the same rows forever.
		every = 150 * time.Millisecond
	default:
		e.t.Fatalf("no lock waits to observe on %s", e.d.Name())
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for {
		var n int
		require.NoError(e.t, e.db.NewRaw(q, "%"+table+"%").Scan(ctx, &n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			var sessions []string
			_ = e.db.NewRaw(diag).Scan(e.ctx, &sessions)
			e.t.Fatalf("no statement on %s came to wait for its row lock; sessions: %q", table, sessions)
		case <-time.After(every):
		}
	}
}
