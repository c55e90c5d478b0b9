package dialecttest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/engine"
)

// testHeldSnapshot: a REPEATABLE READ transaction that has taken its
// snapshot stays open while messages are enqueued, moved, leased and
// acked. Every operation still sees what committed after that snapshot
// (PostgreSQL keeps every row version it may see; the move's lower
// bounds must not hide newer rows from it).
func testHeldSnapshot(t *testing.T, open Open) {
	e := newEnv(t, open)
	e.needRowLocks()
	pids := e.queue(3)
	snap, err := e.db.BeginTx(e.ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer func() { _ = snap.Rollback() }()
	var n int
	require.NoError(t, snap.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(e.tb.Outgoing)).Scan(e.ctx, &n)) // takes the snapshot
	require.Zero(t, n)

	al, _ := e.d.(engine.AckLeaser)
	gl, _ := e.d.(engine.GroupLeaser)
	var want = map[int64][]dialect.MessageID{}
	processed := map[int64]int64{}
	for round := range 4 {
		for _, pid := range pids {
			want[pid] = append(want[pid], e.enqueue(pid, 3)...)
		}
		incoming, err := e.d.IncomingPartitionList(e.ctx, &dialect.IncomingPartitionListParams{})
		require.NoError(t, err)
		require.ElementsMatch(t, pids, incoming, "round %d", round)
		var moved []dialect.SequenceMoveResult
		if round%2 == 0 {
			moved, err = e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 100})
			require.NoError(t, err)
		} else {
			for _, pid := range pids {
				res, err := e.d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 100})
				require.NoError(t, err)
				moved = append(moved, res)
			}
		}
		for i, m := range moved {
			require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[i], Moved: 3, FirstSeq: int64(3*round + 1), LastSeq: int64(3*round + 3)}, m, "round %d", round)
		}
		ready, err := e.d.ProcessorReadyList(e.ctx, &dialect.ProcessorReadyListParams{PartitionIDs: pids})
		require.NoError(t, err)
		require.ElementsMatch(t, pids, ready, "round %d", round)

		// Partition 0 leases alone and acks; 1 and 2 lease in a group (or
		// alone) and ack-and-lease (or ack).
		res := e.lease(pids[0], "o", 2)
		require.Equal(t, want[pids[0]][processed[pids[0]]:processed[pids[0]]+2], msgIDs(res.Messages), "round %d", round)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[0], "o", processed[pids[0]]+2, nil)))
		processed[pids[0]] += 2
		var leases []dialect.ProcessorLeaseResult
		if gl != nil {
			leases, err = gl.ProcessorLeaseGroup(e.ctx, &dialect.ProcessorLeaseGroupParams{Leases: []dialect.ProcessorLeaseParams{
				{PartitionID: pids[1], Owner: "o", Duration: time.Minute, Limit: 1}, {PartitionID: pids[2], Owner: "o", Duration: time.Minute, Limit: 1}}})
			require.NoError(t, err)
		} else {
			leases = []dialect.ProcessorLeaseResult{e.lease(pids[1], "o", 1), e.lease(pids[2], "o", 1)}
		}
		for k, pid := range pids[1:] {
			require.True(t, leases[k].Leased, "round %d", round)
			require.Equal(t, want[pid][processed[pid]:processed[pid]+1], msgIDs(leases[k].Messages))
			if al != nil {
				next, err := al.ProcessorAckLease(e.ctx, &dialect.ProcessorAckLeaseParams{Ack: dialect.ProcessorAdvance(pid, "o", processed[pid]+1, nil),
					Next: &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "o", Duration: time.Minute, Limit: 1}})
				require.NoError(t, err)
				require.True(t, next.Leased)
				require.Equal(t, want[pid][processed[pid]+1:processed[pid]+2], msgIDs(next.Messages))
				require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", processed[pid]+2, nil)))
				processed[pid] += 2
			} else {
				require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", processed[pid]+1, nil)))
				processed[pid]++
			}
		}
		stats, err := e.d.PartitionStats(e.ctx, &dialect.PartitionStatsParams{})
		require.NoError(t, err)
		for _, s := range stats {
			require.Zero(t, s.Incoming, "round %d: moved rows are not incoming", round)
			require.Equal(t, int64(3*round+3), s.Sequence)
			require.Equal(t, processed[s.PartitionID], s.ProcessedSeq)
		}
		counters, err := e.d.VacuumCounterList(e.ctx, &dialect.VacuumCounterListParams{})
		require.NoError(t, err)
		var ranges []dialect.VacuumRange
		for _, c := range counters {
			ranges = append(ranges, dialect.VacuumRange{PartitionID: c.PartitionID, FromSeq: c.PrunedSeq, ToSeq: c.ProcessedSeq})
		}
		_, err = e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: ranges})
		require.NoError(t, err)
	}
	for _, pid := range pids {
		got, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pid, AfterSeq: processed[pid], Limit: 100})
		require.NoError(t, err)
		require.Equal(t, want[pid][processed[pid]:], msgIDs(got), "the rest of partition %d", pid)
	}
	require.NoError(t, snap.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(e.tb.Outgoing)).Scan(e.ctx, &n))
	require.Zero(t, n, "the snapshot was held throughout")
}

// testMultiProcess: two handles on the same tables, as two processes
// have, racing for the same rows. The outcomes checked hold in every
// interleaving.
func testMultiProcess(t *testing.T, open Open) {
	e := newEnv(t, open)
	if !e.multiProcess() {
		t.Skipf("%s is owned by one process", e.d.Name())
	}
	a, b := e.d, e.other()
	t.Run("Leases", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		leaseOn := func(d dialect.Dialect, owner string) dialect.ProcessorLeaseResult {
			res, err := d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: time.Minute, Limit: 1})
			require.NoError(t, err)
			return res
		}
		// Both at once: exactly one wins.
		var wg sync.WaitGroup
		results := make([]dialect.ProcessorLeaseResult, 2)
		for i, d := range []dialect.Dialect{a, b} {
			wg.Go(func() {
				res, err := d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: fmt.Sprint("owner", i), Duration: time.Minute, Limit: 1})
				if err != nil {
					t.Errorf("lease %d: %v", i, err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		require.NotEqual(t, results[0].Leased, results[1].Leased, "exactly one lease")
		winner, loser, wd, ld := "owner0", "owner1", a, b
		if results[1].Leased {
			winner, loser, wd, ld = loser, winner, b, a
		}
		require.Equal(t, winner, e.proc(pid).owner())
		require.Equal(t, 1, e.proc(pid).Attempts, "one attempt counted")

		ready, err := ld.ProcessorReadyList(e.ctx, &dialect.ProcessorReadyListParams{PartitionIDs: []int64{pid}})
		require.NoError(t, err)
		require.Empty(t, ready)
		require.ErrorIs(t, ld.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, loser, 1, nil)), dialect.ErrLeaseLost)

		// The winner's lease expires; the other takes it; the winner's ack is lost.
		e.expireLease(pid)
		require.True(t, leaseOn(ld, loser).Leased)
		require.ErrorIs(t, wd.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, winner, 1, nil)), dialect.ErrLeaseLost)
		if al, ok := wd.(engine.AckLeaser); ok {
			_, err := al.ProcessorAckLease(e.ctx, &dialect.ProcessorAckLeaseParams{Ack: dialect.ProcessorAdvance(pid, winner, 1, nil),
				Next: &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: winner, Duration: time.Minute, Limit: 1}})
			require.ErrorIs(t, err, dialect.ErrLeaseLost)
		}
		require.Equal(t, loser, e.proc(pid).owner())
		require.Zero(t, e.proc(pid).ProcessedSeq)
	})
	t.Run("GroupLeases", func(t *testing.T) {
		e := e.with(t)
		gla, ok := a.(engine.GroupLeaser)
		if !ok {
			t.Skip("no group leases")
		}
		glb := b.(engine.GroupLeaser)
		pids := e.queue(6)
		e.sequenced(2, pids...)
		var leases []dialect.ProcessorLeaseParams
		for _, pid := range pids {
			leases = append(leases, dialect.ProcessorLeaseParams{PartitionID: pid, Duration: time.Minute, Limit: 2})
		}
		var wg sync.WaitGroup
		results := make([][]dialect.ProcessorLeaseResult, 2)
		for i, gl := range []engine.GroupLeaser{gla, glb} {
			mine := make([]dialect.ProcessorLeaseParams, len(leases))
			for k, l := range leases {
				l.Owner = fmt.Sprint("owner", i)
				mine[k] = l
			}
			wg.Go(func() {
				res, err := gl.ProcessorLeaseGroup(e.ctx, &dialect.ProcessorLeaseGroupParams{Leases: mine})
				if err != nil {
					t.Errorf("group %d: %v", i, err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		require.Len(t, results[0], len(pids))
		require.Len(t, results[1], len(pids))
		for k, pid := range pids {
			require.NotEqual(t, results[0][k].Leased, results[1][k].Leased, "partition %d: exactly one owner", k)
			owner := "owner0"
			if results[1][k].Leased {
				owner = "owner1"
			}
			require.Equal(t, owner, e.proc(pid).owner())
			require.Equal(t, 1, e.proc(pid).Attempts)
		}
	})
	t.Run("Moves", func(t *testing.T) {
		// Two sequencers and a producer at once: every message moves
		// exactly once, in enqueue order, with gap-free seqs. The second
		// takes the backlog shape every other pass: where that is one
		// statement (PostgreSQL), its snapshot may predate the other's
		// commit, and the dialect must still move the batch, not fail.
		e := e.with(t)
		pids := e.queue(2)
		var want = map[int64][]dialect.MessageID{}
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			for range 8 {
				for _, pid := range pids {
					rs := rows(pid, 3)
					if err := a.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rs, ChunkRows: 100, ChunkBytes: 1 << 20}); err != nil {
						t.Errorf("insert: %v", err)
						return
					}
					want[pid] = append(want[pid], idsOf(rs)...)
				}
			}
		}()
		var wg sync.WaitGroup
		for i, d := range []dialect.Dialect{a, b} {
			wg.Go(func() {
				done := false
				for pass := 0; ; pass++ {
					var err error
					if i == 0 {
						_, err = d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 4})
					} else {
						for _, pid := range pids {
							if _, err = d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 4}); err != nil {
								break
							}
						}
					}
					if err != nil && !d.IsRetryable(err) {
						t.Errorf("mover %d: %v", i, err)
						return
					}
					if done {
						return // one full pass after the producer finished
					}
					select {
					case <-produced:
						left, err := d.IncomingPartitionList(e.ctx, &dialect.IncomingPartitionListParams{})
						if err != nil {
							t.Errorf("mover %d: %v", i, err)
							return
						}
						done = len(left) == 0
					default:
					}
				}
			})
		}
		wg.Wait()
		<-produced
		e.moveAll(pids...) // whatever a skip left
		for _, pid := range pids {
			require.Equal(t, want[pid], e.outgoingIDs(pid), "partition %d", pid)
			require.Equal(t, int64(len(want[pid])), e.sequence(pid))
			require.Zero(t, e.incoming(pid))
		}
	})
	t.Run("BacklogMoves", func(t *testing.T) {
		// Two sequencers moving one partition in the backlog shape while a
		// producer commits row after row. Where that shape is one
		// statement (PostgreSQL), its snapshot is taken before its lock,
		// so it may read the last seq handed out from before the other's
		// move committed: that statement collides on outgoing's primary
		// key, and the dialect moves the batch again after the lock
		// instead of failing. Every message moves once, in order.
		e := e.with(t)
		pid := e.queue(1)[0]
		var want []dialect.MessageID
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			for range 1000 {
				rs := rows(pid, 1)
				if err := a.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rs, ChunkRows: 100, ChunkBytes: 1 << 20}); err != nil {
					t.Errorf("insert: %v", err)
					return
				}
				want = append(want, idsOf(rs)...)
			}
		}()
		var wg sync.WaitGroup
		for i, d := range []dialect.Dialect{a, b} {
			wg.Go(func() {
				for {
					select {
					case <-produced:
						return
					default:
					}
					if _, err := d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 4}); err != nil && !d.IsRetryable(err) {
						t.Errorf("mover %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		e.moveAll(pid)
		require.Equal(t, want, e.outgoingIDs(pid))
		require.Equal(t, int64(len(want)), e.sequence(pid))
	})
}

// testWakeups (dialect.WakeupNotifier, dialect.WakeupListener): another
// process's notifications are heard with their partitions, one's own are
// not.
func testWakeups(t *testing.T, open Open) {
	e := newEnv(t, open)
	wn, ok := e.d.(dialect.WakeupNotifier)
	if !ok {
		t.Skipf("%s has no notifications", e.d.Name())
	}
	require.NoError(t, wn.NotifyWakeups(e.ctx, "me", nil, nil), "nothing to tell")
	require.NoError(t, wn.NotifyWakeups(e.ctx, "me", []int64{}, []int64{}), "nothing to tell")
	wl, ok := e.d.(dialect.WakeupListener)
	if !ok {
		return
	}
	heard := make(chan string, 10)
	listening := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(e.ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- wl.ListenWakeups(ctx, "me", dialect.Wakeups{
			Incoming:  func(ids []int64) { heard <- fmt.Sprint("incoming ", ids) },
			Sequenced: func(ids []int64) { heard <- fmt.Sprint("sequenced ", ids) },
			Listening: func() { listening <- struct{}{} },
		})
	}()
	select {
	case err := <-ended:
		cancel()
		if errors.Is(err, dialect.ErrNoListener) {
			t.Skipf("opened without a listener: %v", err)
		}
		t.Fatalf("ListenWakeups ended: %v", err)
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("not listening")
	}
	next := func() string {
		select {
		case h := <-heard:
			return h
		case <-time.After(30 * time.Second):
			return "nothing"
		}
	}
	require.NoError(t, wn.NotifyWakeups(e.ctx, "me", []int64{1}, []int64{2}))
	require.NoError(t, wn.NotifyWakeups(e.ctx, "other", []int64{3, 4}, nil))
	require.NoError(t, wn.NotifyWakeups(e.ctx, "other", nil, []int64{5}))
	require.Equal(t, "incoming [3 4]", next(), "its own notification is not heard")
	require.Equal(t, "sequenced [5]", next())
	cancel()
	select {
	case err := <-ended:
		require.NoError(t, err, "ends with its context")
	case <-time.After(30 * time.Second):
		t.Fatal("ListenWakeups did not end with its context")
	}
}
