package dialecttest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/engine"
)

// testProcessorReadyList: partitions with work, no live lease, no retry
// pending, not parked, among those given.
func testProcessorReadyList(t *testing.T, open Open) {
	e := newEnv(t, open)
	ready := func(pids ...int64) []int64 {
		out, err := e.d.ProcessorReadyList(e.ctx, &dialect.ProcessorReadyListParams{PartitionIDs: pids})
		require.NoError(t, err)
		slices.Sort(out)
		return out
	}
	pids := e.queue(7)
	t.Run("NoPartitions", func(t *testing.T) {
		require.Empty(t, ready())
		require.Empty(t, ready([]int64{}...))
	})
	t.Run("NoneReady", func(t *testing.T) {
		require.Empty(t, ready(pids...), "no work anywhere")
	})
	t.Run("States", func(t *testing.T) {
		e := e.with(t)
		// 0 ready, 1 leased, 2 retry pending, 3 parked, 4 no work, 5 acked
		// up to its end, 6 ready but not asked about.
		e.sequenced(2, pids[0], pids[1], pids[2], pids[3], pids[5], pids[6])
		require.True(t, e.lease(pids[1], "o", 10).Leased)
		for _, pid := range []int64{pids[2], pids[3], pids[5]} {
			require.True(t, e.lease(pid, "o", 10).Leased)
		}
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[2], "o", 0, 1, "boom", time.Hour, nil)))
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[3], Owner: "o", Attempts: 3, LastError: "boom", Park: true}))
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[5], "o", 2, nil)))
		e.unchanged("a poll", func() {
			require.Equal(t, []int64{pids[0]}, ready(pids[:6]...))
		})
		e.expireLease(pids[1])
		e.retryDue(pids[2])
		require.Equal(t, []int64{pids[0], pids[1], pids[2]}, ready(pids[:6]...), "an expired lease, a retry due")
		require.Equal(t, []int64{pids[6]}, ready(pids[6]))
	})
}

// testProcessorLease: the lease, its attempt, its batch.
func testProcessorLease(t *testing.T, open Open) {
	e := newEnv(t, open)
	t.Run("Empty", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.unchanged("a lease of an empty partition", func() {
			require.False(t, e.lease(pid, "o", 10).Leased)
		})
	})
	t.Run("Lease", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		ids := e.sequenced(5, pid)[pid]
		from := e.now()
		res, err := e.d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "o", Duration: 90 * time.Second, Limit: 3})
		to := e.now()
		require.NoError(t, err)
		require.True(t, res.Leased)
		require.Equal(t, dialect.ProcessorState{ProcessedSeq: 0, Attempts: 0}, res.State, "attempts before this lease")
		require.Equal(t, []int64{1, 2, 3}, seqsOf(res.Messages))
		require.Equal(t, ids[:3], msgIDs(res.Messages))
		for _, m := range res.Messages {
			require.Equal(t, "t", m.PayloadType)
			require.False(t, m.Purged)
		}
		r := e.proc(pid)
		require.Equal(t, "o", r.owner())
		require.Equal(t, 1, r.Attempts, "counted at the lease")
		require.NotNil(t, r.LeaseLimit)
		require.Equal(t, 3, *r.LeaseLimit)
		e.leaseEnds(pid, 90*time.Second, from, to, "lease")

		e.unchanged("a lease of a leased partition", func() {
			require.False(t, e.lease(pid, "p", 10).Leased, "live lease of another owner")
			require.False(t, e.lease(pid, "o", 10).Leased, "live lease of the same owner")
		})

		// Expired: another owner takes it; the earlier attempt shows.
		e.expireLease(pid)
		res = e.lease(pid, "p", 10)
		require.True(t, res.Leased)
		require.Equal(t, dialect.ProcessorState{ProcessedSeq: 0, Attempts: 1}, res.State)
		require.Equal(t, []int64{1, 2, 3, 4, 5}, seqsOf(res.Messages), "a limit past the end reads what there is")
		r = e.proc(pid)
		require.Equal(t, "p", r.owner())
		require.Equal(t, 2, r.Attempts)
		require.Equal(t, 10, *r.LeaseLimit)
	})
	t.Run("Backoff", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		e.sequenced(2, pids...)
		require.True(t, e.lease(pids[0], "o", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[0], "o", 0, 1, "boom", time.Hour, nil)))
		require.True(t, e.lease(pids[1], "o", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[1], Owner: "o", Attempts: 1, Park: true}))
		e.unchanged("leases of a retrying and a parked partition", func() {
			require.False(t, e.lease(pids[0], "o", 1).Leased, "retry pending")
			require.False(t, e.lease(pids[1], "o", 1).Leased, "parked")
		})
		e.retryDue(pids[0])
		res := e.lease(pids[0], "o", 1)
		require.True(t, res.Leased, "retry due")
		require.Equal(t, dialect.ProcessorState{Attempts: 1}, res.State)
	})
}

// testProcessorAck: an outcome in its own transaction, guarded by the owner.
func testProcessorAck(t *testing.T, open Open) {
	e := newEnv(t, open)
	t.Run("Advance", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", 2, nil)))
		r := e.proc(pid)
		require.Equal(t, int64(2), r.ProcessedSeq)
		require.Zero(t, r.Attempts)
		require.Empty(t, r.owner(), "lease released")
		require.Nil(t, r.LockedUntil)
		require.Nil(t, r.NextAttemptAt)
		require.Empty(t, r.lastError())
	})
	t.Run("LeaseLost", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		e.expireLease(pid)
		require.True(t, e.lease(pid, "p", 2).Leased)
		e.unchanged("an ack of a lost lease", func() {
			err := e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", 2, nil))
			require.ErrorIs(t, err, dialect.ErrLeaseLost)
		})
	})
	t.Run("OwnTransaction", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		e.unchanged("an ack that names a connection", func() {
			err := e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
				u := dialect.ProcessorAdvance(pid, "o", 2, nil)
				u.Conn = tx // ProcessorAck takes its own transaction, never the caller's
				return e.d.ProcessorAck(ctx, u)
			})
			require.ErrorContains(t, err, "Conn must be nil")
		})
	})
	t.Run("Failure", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.True(t, e.lease(pid, "o", 3).Leased)
		from := e.now()
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pid, "o", 1, 2, "bo\x00om", time.Minute, nil)))
		to := e.now()
		r := e.proc(pid)
		require.Equal(t, int64(1), r.ProcessedSeq, "the acked prefix")
		require.Equal(t, 2, r.Attempts)
		require.Equal(t, dialect.ErrorText("bo\x00om"), r.lastError())
		require.NotNil(t, r.NextAttemptAt)
		require.WithinRange(t, r.NextAttemptAt.UTC(), from.Add(time.Minute-time.Second), to.Add(time.Minute+time.Second))
		require.Empty(t, r.owner())
		require.Nil(t, r.ParkedAt)
	})
	t.Run("ParkAndResume", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pid, Owner: "o", Attempts: 5, LastError: "x", Park: true}))
		r := e.proc(pid)
		require.NotNil(t, r.ParkedAt)
		require.Equal(t, 5, r.Attempts)
		// An operator's outcome without Park clears it (transactional, no owner).
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pid, ProcessedSeq: 1}))
		r = e.proc(pid)
		require.Nil(t, r.ParkedAt)
		require.Equal(t, int64(1), r.ProcessedSeq)
	})
	t.Run("DeadLetters", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		ids := e.sequenced(2, pids...)
		require.True(t, e.lease(pids[0], "o", 2).Leased)
		dls := []dialect.DeadLetter{
			deadLetter(pids[0], 1, ids[pids[0]][0], "a"),
			deadLetter(pids[0], 2, ids[pids[0]][1], "b"),
		}
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[0], "o", 2, dls)))
		require.NotZero(t, dls[0].ID, "the letter's id is set")
		require.NotZero(t, dls[1].ID)
		require.NotEqual(t, dls[0].ID, dls[1].ID)
		got, err := e.d.DeadLetterList(e.ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{IDs: []int64{dls[0].ID, dls[1].ID}}})
		require.NoError(t, err)
		require.Len(t, got, 2)
		for i, g := range got {
			require.Equal(t, dls[i].ID, g.ID)
			require.Equal(t, dls[i].PartitionID, g.PartitionID)
			require.Equal(t, dls[i].Seq, g.Seq)
			require.Equal(t, dls[i].MessageID, g.MessageID)
			require.Equal(t, dls[i].Key, g.Key)
			require.Equal(t, dls[i].PayloadType, g.PayloadType)
			require.Equal(t, string(dls[i].Payload), string(g.Payload))
			require.Equal(t, string(dls[i].Headers), string(g.Headers))
			require.Equal(t, dls[i].LastError, g.LastError)
			require.Equal(t, dls[i].Attempts, g.Attempts)
			require.Equal(t, dialect.DeadLetterPending, g.Status)
			require.Nil(t, g.CompletedAt)
			require.Nil(t, g.ReplayID)
			require.WithinDuration(t, dls[i].CreatedAt, g.CreatedAt, time.Second)
		}
		require.Equal(t, int64(2), e.proc(pids[0]).ProcessedSeq)

		// A replay of letter 0 acked: the letter becomes resolved.
		replay := newIDs(1)[0]
		n, err := e.d.DeadLetterUpdate(e.ctx, &dialect.DeadLetterUpdateParams{Conn: e.db, IDs: []int64{dls[0].ID},
			From: dialect.DeadLetterPending, To: dialect.DeadLetterReplayed, ReplayIDs: []dialect.MessageID{replay}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.True(t, e.lease(pids[1], "o", 2).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[1], Owner: "o", ProcessedSeq: 1,
			ResolveReplays: []dialect.MessageID{replay}}))
		got, err = e.d.DeadLetterList(e.ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{IDs: []int64{dls[0].ID}}})
		require.NoError(t, err)
		require.Equal(t, dialect.DeadLetterResolved, got[0].Status)
		require.NotNil(t, got[0].CompletedAt)
		require.Equal(t, replay, *got[0].ReplayID)
	})
}

func deadLetter(pid, seq int64, id dialect.MessageID, payloadType string) dialect.DeadLetter {
	return dialect.DeadLetter{PartitionID: pid, Seq: seq, MessageID: id, Key: "key", PayloadType: payloadType,
		Payload: []byte("payload"), Headers: []byte(`{"h":"v"}`), CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
		LastError: "failed", Attempts: 3}
}

// testProcessorAckLease (engine.AckLeaser): a clean ack and the next
// lease in one transaction.
func testProcessorAckLease(t *testing.T, open Open) {
	e := newEnv(t, open)
	al, ok := e.d.(engine.AckLeaser)
	if !ok {
		t.Skipf("%s acks, then leases (no engine.AckLeaser)", e.d.Name())
	}
	ackLease := func(pid int64, owner string, seq int64, d time.Duration, limit int) (dialect.ProcessorLeaseResult, error) {
		return al.ProcessorAckLease(e.ctx, &dialect.ProcessorAckLeaseParams{
			Ack:  dialect.ProcessorAdvance(pid, owner, seq, nil),
			Next: &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: d, Limit: limit},
		})
	}
	t.Run("More", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		ids := e.sequenced(5, pid)[pid]
		_, err := e.d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "o", Duration: time.Second, Limit: 2})
		require.NoError(t, err)
		from := e.now()
		res, err := ackLease(pid, "o", 2, 7*time.Minute, 2)
		to := e.now()
		require.NoError(t, err)
		require.True(t, res.Leased)
		require.Equal(t, dialect.ProcessorState{ProcessedSeq: 2}, res.State)
		require.Equal(t, []int64{3, 4}, seqsOf(res.Messages))
		require.Equal(t, ids[2:4], msgIDs(res.Messages))
		r := e.proc(pid)
		require.Equal(t, int64(2), r.ProcessedSeq)
		require.Equal(t, "o", r.owner())
		require.Equal(t, 1, r.Attempts, "the new lease's attempt")
		require.Equal(t, 2, *r.LeaseLimit)
		e.leaseEnds(pid, 7*time.Minute, from, to, "ack and lease")
	})
	t.Run("NothingMore", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		res, err := ackLease(pid, "o", 2, time.Minute, 2)
		require.NoError(t, err)
		require.False(t, res.Leased)
		r := e.proc(pid)
		require.Equal(t, int64(2), r.ProcessedSeq)
		require.Empty(t, r.owner(), "released")
		require.Zero(t, r.Attempts)
	})
	t.Run("LeaseLost", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.True(t, e.lease(pid, "o", 1).Leased)
		e.expireLease(pid)
		require.True(t, e.lease(pid, "p", 1).Leased)
		e.unchanged("an ack and lease of a lost lease", func() {
			_, err := ackLease(pid, "o", 1, time.Minute, 1)
			require.ErrorIs(t, err, dialect.ErrLeaseLost)
		})
	})
}

// groupLeaser returns the dialect's group leases, or skips.
func groupLeaser(t *testing.T, d dialect.Dialect) engine.GroupLeaser {
	gl, ok := d.(engine.GroupLeaser)
	if !ok {
		t.Skipf("%s has no group leases (no engine.GroupLeaser)", d.Name())
	}
	return gl
}

// testProcessorLeaseGroup (engine.GroupLeaser): several leases in one
// transaction, each with its own duration and limit.
func testProcessorLeaseGroup(t *testing.T, open Open) {
	e := newEnv(t, open)
	gl := groupLeaser(t, e.d)
	group := func(leases ...dialect.ProcessorLeaseParams) []dialect.ProcessorLeaseResult {
		out, err := gl.ProcessorLeaseGroup(e.ctx, &dialect.ProcessorLeaseGroupParams{Leases: leases})
		require.NoError(t, err)
		require.Len(t, out, len(leases))
		return out
	}
	lp := func(pid int64, d time.Duration, limit int) dialect.ProcessorLeaseParams {
		return dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "g", Duration: d, Limit: limit}
	}
	t.Run("NoLeases", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("a group of no leases", func() {
			require.Empty(t, group())
			require.Empty(t, group([]dialect.ProcessorLeaseParams{}...))
		})
	})
	t.Run("NothingLeasable", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		e.unchanged("a group of empty partitions", func() {
			for _, r := range group(lp(pids[0], time.Minute, 1), lp(pids[1], time.Minute, 1)) {
				require.False(t, r.Leased)
			}
		})
	})
	t.Run("OwnParams", func(t *testing.T) {
		// The pool groups requests of every queue, and each queue has its
		// own lease duration and batch size; the first request's duration
		// and the largest limit once went to every partition of a group.
		e := e.with(t)
		pids := e.queue(4)
		ids := e.sequenced(6, pids...)
		durs := []time.Duration{2 * time.Second, 300 * time.Second, 2 * time.Second, 3000 * time.Second}
		limits := []int{1, 3, 2, 4}
		order := []int{2, 0, 3, 1} // not in partition order, short first
		var leases []dialect.ProcessorLeaseParams
		for _, i := range order {
			leases = append(leases, lp(pids[i], durs[i], limits[i]))
		}
		from := e.now()
		out := group(leases...)
		to := e.now()
		for _, i := range order {
			e.leaseEnds(pids[i], durs[i], from, to, "group lease")
		}
		for k, i := range order {
			pid := pids[i]
			require.True(t, out[k].Leased, "partition %d", i)
			require.Equal(t, dialect.ProcessorState{}, out[k].State)
			require.Equal(t, seqRange(1, int64(limits[i])), seqsOf(out[k].Messages), "partition %d reads its own limit", i)
			require.Equal(t, ids[pid][:limits[i]], msgIDs(out[k].Messages))
			r := e.proc(pid)
			require.Equal(t, "g", r.owner())
			require.Equal(t, 1, r.Attempts)
			require.NotNil(t, r.LeaseLimit)
			require.Equal(t, limits[i], *r.LeaseLimit, "partition %d records its own limit", i)
		}
	})
	t.Run("Mixed", func(t *testing.T) {
		// In one group: leasable, empty, leased elsewhere, parked, retry
		// pending, and an expired lease taken over.
		e := e.with(t)
		pids := e.queue(6)
		e.sequenced(2, pids[0], pids[2], pids[3], pids[4], pids[5])
		require.True(t, e.lease(pids[2], "other", 1).Leased)
		require.True(t, e.lease(pids[3], "other", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[3], Owner: "other", Attempts: 1, Park: true}))
		require.True(t, e.lease(pids[4], "other", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[4], "other", 0, 1, "x", time.Hour, nil)))
		require.True(t, e.lease(pids[5], "other", 1).Leased)
		e.expireLease(pids[5])
		before := map[int64]procRow{}
		for _, pid := range pids[1:5] {
			before[pid] = e.proc(pid)
		}
		var leases []dialect.ProcessorLeaseParams
		for _, pid := range pids {
			leases = append(leases, lp(pid, time.Minute, 5))
		}
		out := group(leases...)
		require.True(t, out[0].Leased)
		require.Equal(t, []int64{1, 2}, seqsOf(out[0].Messages))
		for i := 1; i <= 4; i++ {
			require.False(t, out[i].Leased, "partition %d", i)
			require.Equal(t, before[pids[i]], e.proc(pids[i]), "partition %d untouched", i)
		}
		require.True(t, out[5].Leased, "an expired lease is taken over")
		require.Equal(t, dialect.ProcessorState{Attempts: 1}, out[5].State)
		require.Equal(t, "g", e.proc(pids[5]).owner())
		require.Equal(t, 2, e.proc(pids[5]).Attempts)
	})
	t.Run("RowLocked", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		pids := e.queue(2)
		e.sequenced(2, pids...)
		_, release := e.holdRow(e.tb.Processor, "partition_id", pids[0])
		out := group(lp(pids[0], time.Minute, 5), lp(pids[1], time.Minute, 5))
		require.False(t, out[0].Leased, "held by another transaction: skipped, not waited for")
		require.True(t, out[1].Leased)
		release(false)
		require.Empty(t, e.proc(pids[0]).owner())
	})
}

// testProcessorAckLeaseGroup (engine.GroupLeaser): several clean acks,
// each with its partition's own next lease, in one transaction.
func testProcessorAckLeaseGroup(t *testing.T, open Open) {
	e := newEnv(t, open)
	gl := groupLeaser(t, e.d)
	group := func(items ...dialect.ProcessorAckLeaseParams) []dialect.ProcessorGroupResult {
		out, err := gl.ProcessorAckLeaseGroup(e.ctx, &dialect.ProcessorAckLeaseGroupParams{Items: items})
		require.NoError(t, err)
		require.Len(t, out, len(items))
		return out
	}
	item := func(pid int64, owner string, seq int64, d time.Duration, limit int) dialect.ProcessorAckLeaseParams {
		return dialect.ProcessorAckLeaseParams{Ack: dialect.ProcessorAdvance(pid, owner, seq, nil),
			Next: &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: d, Limit: limit}}
	}
	t.Run("NoItems", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("a group of no acks", func() {
			require.Empty(t, group())
			require.Empty(t, group([]dialect.ProcessorAckLeaseParams{}...))
		})
	})
	t.Run("OwnParams", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(4)
		ids := e.sequenced(6, pids...)
		for _, pid := range pids {
			_, err := e.d.ProcessorLease(e.ctx, &dialect.ProcessorLeaseParams{PartitionID: pid, Owner: "g", Duration: time.Second, Limit: 2})
			require.NoError(t, err)
		}
		// The first item's lease is the short one.
		durs := []time.Duration{2 * time.Second, 300 * time.Second, 3000 * time.Second, 2 * time.Second}
		limits := []int{2, 1, 3, 2}
		acked := []int64{2, 1, 2, 0}
		order := []int{3, 1, 0, 2}
		var items []dialect.ProcessorAckLeaseParams
		for _, i := range order {
			items = append(items, item(pids[i], "g", acked[i], durs[i], limits[i]))
		}
		from := e.now()
		out := group(items...)
		to := e.now()
		for _, i := range order {
			e.leaseEnds(pids[i], durs[i], from, to, "group ack and lease")
		}
		for k, i := range order {
			pid := pids[i]
			require.NoError(t, out[k].Err, "partition %d", i)
			require.True(t, out[k].Lease.Leased, "partition %d has more", i)
			require.Equal(t, dialect.ProcessorState{ProcessedSeq: acked[i]}, out[k].Lease.State)
			require.Equal(t, seqRange(acked[i]+1, acked[i]+int64(limits[i])), seqsOf(out[k].Lease.Messages), "partition %d reads its own limit", i)
			require.Equal(t, ids[pid][acked[i]:acked[i]+int64(limits[i])], msgIDs(out[k].Lease.Messages))
			r := e.proc(pid)
			require.Equal(t, acked[i], r.ProcessedSeq)
			require.Equal(t, "g", r.owner())
			require.Equal(t, 1, r.Attempts)
			require.Empty(t, r.lastError())
			require.NotNil(t, r.LeaseLimit)
			require.Equal(t, limits[i], *r.LeaseLimit, "partition %d records its own limit", i)
		}
	})
	t.Run("NothingMoreAndLeaseLost", func(t *testing.T) {
		// One partition acked to its end, one whose lease another owner
		// took over, one with more: the lost one reports ErrLeaseLost and
		// keeps the other owner's lease; the others are not affected.
		e := e.with(t)
		pids := e.queue(3)
		e.sequenced(3, pids...)
		for _, pid := range pids {
			require.True(t, e.lease(pid, "g", 3).Leased)
		}
		e.expireLease(pids[1])
		require.True(t, e.lease(pids[1], "thief", 3).Leased)
		stolen := e.proc(pids[1])
		out := group(item(pids[0], "g", 3, time.Minute, 3), item(pids[1], "g", 3, time.Minute, 3), item(pids[2], "g", 1, time.Minute, 1))

		require.NoError(t, out[0].Err)
		require.False(t, out[0].Lease.Leased, "nothing more")
		r := e.proc(pids[0])
		require.Equal(t, int64(3), r.ProcessedSeq)
		require.Empty(t, r.owner(), "released")
		require.Nil(t, r.LockedUntil)
		require.Zero(t, r.Attempts)

		require.ErrorIs(t, out[1].Err, dialect.ErrLeaseLost)
		require.False(t, out[1].Lease.Leased)
		require.Equal(t, stolen, e.proc(pids[1]), "the lost partition is the new owner's")

		require.NoError(t, out[2].Err)
		require.True(t, out[2].Lease.Leased)
		require.Equal(t, []int64{2}, seqsOf(out[2].Lease.Messages))
		require.Equal(t, int64(1), e.proc(pids[2]).ProcessedSeq)
	})
	t.Run("AllLost", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.True(t, e.lease(pid, "g", 1).Leased)
		e.expireLease(pid)
		require.True(t, e.lease(pid, "thief", 1).Leased)
		e.unchanged("a group whose every lease was lost", func() {
			out := group(item(pid, "g", 1, time.Minute, 1))
			require.ErrorIs(t, out[0].Err, dialect.ErrLeaseLost)
		})
	})
}

// testProcessorLock: the transactional mode's row lock.
func testProcessorLock(t *testing.T, open Open) {
	e := newEnv(t, open)
	lock := func(conn bun.IConn, pid int64) dialect.ProcessorLockResult {
		res, err := e.d.ProcessorLock(e.ctx, &dialect.ProcessorLockParams{Conn: conn, PartitionID: pid})
		require.NoError(t, err)
		return res
	}
	inTx := func(fn func(ctx context.Context, tx bun.Tx)) {
		require.NoError(t, e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			fn(ctx, tx)
			return nil
		}))
	}
	t.Run("States", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(4)
		e.sequenced(2, pids[0], pids[2], pids[3])
		require.True(t, e.lease(pids[2], "o", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[2], "o", 1, 2, "x", time.Hour, nil)))
		require.True(t, e.lease(pids[3], "o", 1).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[3], Owner: "o", Attempts: 1, Park: true}))
		e.unchanged("row locks", func() {
			inTx(func(_ context.Context, tx bun.Tx) {
				res := lock(tx, pids[0])
				require.True(t, res.Locked)
				require.Equal(t, dialect.ProcessorState{}, res.State)
				require.False(t, lock(tx, pids[1]).Locked, "no work")
				require.False(t, lock(tx, pids[2]).Locked, "retry pending")
				require.False(t, lock(tx, pids[3]).Locked, "parked")
			})
		})
		e.retryDue(pids[2])
		inTx(func(_ context.Context, tx bun.Tx) {
			res := lock(tx, pids[2])
			require.True(t, res.Locked, "retry due")
			require.Equal(t, dialect.ProcessorState{ProcessedSeq: 1, Attempts: 2}, res.State)
		})
	})
	t.Run("LockedElsewhere", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		pids := e.queue(2)
		e.sequenced(2, pids...)
		_, release := e.holdRow(e.tb.Processor, "partition_id", pids[0])
		inTx(func(_ context.Context, tx bun.Tx) {
			require.False(t, lock(tx, pids[0]).Locked, "held by another transaction: skipped, not waited for")
			require.True(t, lock(tx, pids[1]).Locked)
		})
		release(false)

		// Held by ProcessorLock itself: another ProcessorLock and a group
		// lease skip it.
		tx, err := e.db.BeginTx(e.ctx, e.d.TxOptions())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		require.True(t, lock(tx, pids[0]).Locked)
		inTx(func(_ context.Context, tx2 bun.Tx) {
			require.False(t, lock(tx2, pids[0]).Locked)
		})
		if gl, ok := e.d.(engine.GroupLeaser); ok {
			out, err := gl.ProcessorLeaseGroup(e.ctx, &dialect.ProcessorLeaseGroupParams{Leases: []dialect.ProcessorLeaseParams{
				{PartitionID: pids[0], Owner: "g", Duration: time.Minute, Limit: 1}, {PartitionID: pids[1], Owner: "g", Duration: time.Minute, Limit: 1}}})
			require.NoError(t, err)
			require.False(t, out[0].Leased, "a group lease skips a row in a transactional delivery")
			require.True(t, out[1].Leased)
		}
		require.NoError(t, tx.Rollback())
	})
}

// testOutgoingList: the next batch after a cursor, with bodies.
func testOutgoingList(t *testing.T, open Open) {
	e := newEnv(t, open)
	pids := e.queue(2)
	ids := e.sequenced(5, pids...)
	list := func(conn bun.IConn, pid, after int64, limit int) []dialect.OutgoingMessage {
		out, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: conn, PartitionID: pid, AfterSeq: after, Limit: limit})
		require.NoError(t, err)
		return out
	}
	got := list(e.db, pids[1], 1, 3)
	require.Equal(t, []int64{2, 3, 4}, seqsOf(got))
	require.Equal(t, ids[pids[1]][1:4], msgIDs(got), "its own partition's messages")
	require.Equal(t, []int64{5}, seqsOf(list(e.db, pids[1], 4, 3)))
	require.Empty(t, list(e.db, pids[1], 5, 3), "past the end")
	require.NoError(t, e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
		require.Equal(t, []int64{1, 2, 3, 4, 5}, seqsOf(list(tx, pids[0], 0, 100)), "in a transaction")
		return nil
	}))
}

// testProcessorUpdate: an outcome on the caller's transaction.
func testProcessorUpdate(t *testing.T, open Open) {
	e := newEnv(t, open)
	update := func(p *dialect.ProcessorUpdateParams) error {
		return e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			p.Conn = tx
			return e.d.ProcessorUpdate(ctx, p)
		})
	}
	t.Run("Transactional", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		ids := e.sequenced(4, pid)[pid]
		require.NoError(t, update(dialect.ProcessorAdvance(pid, "", 1, nil)))
		require.Equal(t, int64(1), e.proc(pid).ProcessedSeq)
		from := e.now()
		require.NoError(t, update(dialect.ProcessorFailure(pid, "", 2, 1, "boom", 30*time.Second, nil)))
		to := e.now()
		r := e.proc(pid)
		require.Equal(t, int64(2), r.ProcessedSeq)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, "boom", r.lastError())
		require.WithinRange(t, r.NextAttemptAt.UTC(), from.Add(29*time.Second), to.Add(31*time.Second))
		dl := []dialect.DeadLetter{deadLetter(pid, 3, ids[2], "t")}
		p := &dialect.ProcessorUpdateParams{PartitionID: pid, ProcessedSeq: 3, DeadLetters: dl}
		require.NoError(t, update(p))
		require.NotZero(t, dl[0].ID, "set in the params' own slice")
		r = e.proc(pid)
		require.Equal(t, int64(3), r.ProcessedSeq)
		require.Zero(t, r.Attempts)
		require.Empty(t, r.lastError(), "cleared")
		require.Nil(t, r.NextAttemptAt, "cleared")
		require.Equal(t, 1, e.count(e.tb.DeadLetters, "id = ?", dl[0].ID))
	})
	t.Run("RolledBack", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		ids := e.sequenced(2, pid)[pid]
		e.unchanged("an update rolled back", func() {
			err := e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
				require.NoError(t, e.d.ProcessorUpdate(ctx, &dialect.ProcessorUpdateParams{Conn: tx, PartitionID: pid, ProcessedSeq: 1,
					DeadLetters: []dialect.DeadLetter{deadLetter(pid, 1, ids[0], "t")}}))
				return context.Canceled
			})
			require.ErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("Guarded", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.True(t, e.lease(pid, "o", 2).Leased)
		e.unchanged("a guarded update of another owner", func() {
			require.ErrorIs(t, update(dialect.ProcessorAdvance(pid, "p", 2, nil)), dialect.ErrLeaseLost)
		})
		require.NoError(t, update(dialect.ProcessorAdvance(pid, "o", 2, nil)))
		require.Empty(t, e.proc(pid).owner())
	})
}

// testPreparedHotPath: the prepared hot path (ProcessorLock, OutgoingList,
// ProcessorUpdate) inside a transaction of RunInTx, on a dialect that
// prepared its statements at start and on one that did not (the first run
// of a statement in a transaction, before the database has it), and again
// after Release.
func testPreparedHotPath(t *testing.T, open Open) {
	e := newEnv(t, open)
	pid := e.queue(1)[0]
	ids := e.sequenced(9, pid)[pid]
	step := func(t *testing.T, d dialect.Dialect, seq int64) {
		require.NoError(t, d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			res, err := d.ProcessorLock(ctx, &dialect.ProcessorLockParams{Conn: tx, PartitionID: pid})
			require.NoError(t, err)
			require.True(t, res.Locked)
			require.Equal(t, seq, res.State.ProcessedSeq)
			msgs, err := d.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: tx, PartitionID: pid, AfterSeq: seq, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, []int64{seq + 1}, seqsOf(msgs))
			require.Equal(t, ids[seq], msgs[0].ID)
			return d.ProcessorUpdate(ctx, &dialect.ProcessorUpdateParams{Conn: tx, PartitionID: pid, ProcessedSeq: seq + 1})
		}))
		require.Equal(t, seq+1, e.proc(pid).ProcessedSeq)
	}
	seq := int64(0)
	t.Run("Prepared", func(t *testing.T) {
		d := e.other()
		require.NoError(t, d.Prepare(e.ctx))
		for range 2 {
			step(t, d, seq)
			seq++
		}
		require.NoError(t, d.Release())
		step(t, d, seq)
		seq++
	})
	t.Run("Unprepared", func(t *testing.T) {
		d := e.other()
		for range 2 {
			step(t, d, seq)
			seq++
		}
		require.NoError(t, d.Release())
		step(t, d, seq)
		seq++
		require.NoError(t, d.Prepare(e.ctx), "prepared after a release")
		step(t, d, seq)
		seq++
	})
}
