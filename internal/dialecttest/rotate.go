package dialecttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/vacuum"
)

// rotateEnv is a fresh env of a dialect that rotates its message tables.
type rotateEnv struct {
	*env
	r vacuum.Rotator
}

func newRotateEnv(t *testing.T, open Open) *rotateEnv {
	e := newEnv(t, open)
	r, ok := e.d.(vacuum.Rotator)
	if !ok {
		t.Skipf("%s prunes row by row (no vacuum.Rotator)", e.d.Name())
	}
	return &rotateEnv{env: e, r: r}
}

// rotate runs one round in which the current generation is due (by size:
// any table takes a byte) or not (not by age either).
func (e *rotateEnv) rotate(due bool) dialect.TableRotateResult {
	e.t.Helper()
	p := &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Minute, LockTimeout: 100 * time.Millisecond}
	if due {
		p.Size = 1
	}
	return e.rotateWith(p)
}

func (e *rotateEnv) rotateWith(p *dialect.TableRotateParams) dialect.TableRotateResult {
	e.t.Helper()
	res, err := e.r.TableRotate(e.ctx, p)
	require.NoError(e.t, err)
	require.True(e.t, res.Turn, "no other process rotates these tables")
	return res
}

// states is every generation's state, by gen.
func (e *rotateEnv) states() []string {
	e.t.Helper()
	var out []string
	require.NoError(e.t, e.db.NewRaw("SELECT state FROM ? ORDER BY gen", bun.Ident(e.tb.Generations)).Scan(e.ctx, &out))
	return out
}

// gens is the generation of each of a partition's outgoing rows, in seq
// order, checking its body is in the same one.
func (e *rotateEnv) gens(pid int64) []int {
	e.t.Helper()
	var rows []struct {
		Gen     int  `bun:"gen"`
		BodyGen *int `bun:"body_gen"`
	}
	require.NoError(e.t, e.db.NewRaw("SELECT o.gen, (SELECT b.gen FROM ? b WHERE b.id = o.body_id) AS body_gen FROM ? o WHERE o.partition_id = ? ORDER BY o.seq",
		bun.Ident(e.tb.Body), bun.Ident(e.tb.Outgoing), pid).Scan(e.ctx, &rows))
	out := make([]int, len(rows))
	for i, r := range rows {
		require.NotNil(e.t, r.BodyGen, "the body of partition %d's row %d", pid, i)
		require.Equal(e.t, r.Gen, *r.BodyGen, "a message's outgoing row and body share a generation")
		out[i] = r.Gen
	}
	return out
}

// ack moves pid's cursor to seq (the processor's own statements are
// ProcessorAck's cases).
func (e *env) ack(pid, seq int64) {
	e.t.Helper()
	_, err := e.db.NewRaw("UPDATE ? SET processed_seq = ? WHERE partition_id = ?", bun.Ident(e.tb.Processor), seq, pid).Exec(e.ctx)
	require.NoError(e.t, err)
}

func (e *env) prunedSeq(pid int64) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.db.NewRaw("SELECT pruned_seq FROM ? WHERE partition_id = ?", bun.Ident(e.tb.VacuumCounter), pid).Scan(e.ctx, &n))
	return n
}

// testTableRotate: a generation is truncated only once every message in it
// is acked and no transaction uses its tables; the prune is held while the
// rotation keeps up and resumes when a generation is pinned; a writer with
// a stale generation loses nothing (docs/ROTATION.md).
func testTableRotate(t *testing.T, open Open) {
	d := open(t, freshPrefix())
	_ = d.Release()
	if _, ok := d.(vacuum.Rotator); !ok {
		t.Skip("prunes row by row (no vacuum.Rotator)")
	}
	t.Run("TruncatesAckedGeneration", func(t *testing.T) {
		e := newRotateEnv(t, open)
		pids := e.queue(2)
		e.sequenced(3, pids...)
		require.Equal(t, []int{0, 0, 0}, e.gens(pids[0]))
		res := e.rotate(true)
		require.True(t, res.Switched)
		require.Equal(t, 1, res.Current)
		require.Equal(t, []string{"closed", "current", "empty"}, e.states())

		res = e.rotate(false)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused, "nothing is acked")
		require.False(t, res.Switched, "not due")
		require.False(t, res.Pinned)
		e.ack(pids[0], 3)
		res = e.rotate(false)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused, "one partition is acked, not the other")
		e.ack(pids[1], 2)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, e.rotate(false).Refused, "its last message is not acked")
		e.ack(pids[1], 3)
		res = e.rotate(false)
		require.Equal(t, []int{0}, res.Truncated)
		require.Empty(t, res.Refused)
		require.Equal(t, []string{"empty", "current", "empty"}, e.states())
		require.Zero(t, e.count(e.tb.Outgoing, ""))
		require.Zero(t, e.count(e.tb.Body, ""))
		for _, pid := range pids {
			require.Equal(t, int64(3), e.prunedSeq(pid), "pruned_seq says what truncation removed")
			require.Equal(t, int64(3), e.sequence(pid), "the last seq handed out is the cursor once the rows are gone")
		}

		// New messages go to the current generation and number on.
		e.sequenced(2, pids[0])
		require.Equal(t, []int{1, 1}, e.gens(pids[0]))
		out := e.outgoing(pids[0])
		require.Equal(t, int64(4), out[0].Seq)
		require.Equal(t, int64(5), out[1].Seq)
		list, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pids[0], AfterSeq: 3, Limit: 10})
		require.NoError(t, err)
		require.Len(t, list, 2)
	})

	t.Run("PinnedGenerationResumesPrune", func(t *testing.T) {
		e := newRotateEnv(t, open)
		pids := e.queue(2) // pids[0] is never acked: it pins generation 0
		e.sequenced(1, pids...)
		require.True(t, e.rotate(true).Switched) // 0 closed, 1 current
		e.sequenced(2, pids[1])
		e.ack(pids[1], 3)
		counters, err := e.d.VacuumCounterList(e.ctx, &dialect.VacuumCounterListParams{})
		require.NoError(t, err)
		require.Empty(t, counters, "the rotation keeps up: the prune is held")

		res := e.rotate(true) // 0 refused, 1 closed, 2 current
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused)
		require.True(t, res.Switched)
		require.False(t, res.Pinned)
		e.sequenced(1, pids[1])
		e.ack(pids[1], 4)
		res = e.rotate(true) // 1 truncated; the switch to 0 is due and impossible
		require.Equal(t, []int{1}, res.Truncated)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused)
		require.True(t, res.Pinned)
		require.False(t, res.Switched)
		counters, err = e.d.VacuumCounterList(e.ctx, &dialect.VacuumCounterListParams{})
		require.NoError(t, err)
		// Its seq 1 is in pinned generation 0: truncating 1 removed 2..3.
		require.Equal(t, []dialect.VacuumCounter{{PartitionID: pids[1], PrunedSeq: 0, ProcessedSeq: 4}}, counters,
			"pinned: the prune resumes")
		n, err := e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: []dialect.VacuumRange{{PartitionID: pids[1], FromSeq: 0, ToSeq: 4}}})
		require.NoError(t, err)
		require.Equal(t, 2, n, "seqs 1 (generation 0) and 4 (generation 2); 2 and 3 went with generation 1")

		e.ack(pids[0], 1)
		e.sequenced(1, pids[1]) // generation 2, current
		res = e.rotate(true)
		require.Equal(t, []int{0}, res.Truncated)
		require.True(t, res.Switched)
		require.Equal(t, 0, res.Current)
		require.False(t, res.Pinned)
		require.Equal(t, 1, e.count(e.tb.Outgoing, ""))
		require.Equal(t, 1, e.count(e.tb.Body, ""))
	})

	t.Run("DrainingGenerationKeepsPruneHeld", func(t *testing.T) {
		e := newRotateEnv(t, open)
		pids := e.queue(2) // pids[0] keeps generation 0 pinned while it drains
		e.sequenced(4, pids[0])
		e.sequenced(1, pids[1])
		require.True(t, e.rotate(true).Switched) // 0 closed, 1 current
		e.sequenced(1, pids[1])
		e.ack(pids[1], 2)
		require.True(t, e.rotate(true).Switched) // 0 refused, 1 closed, 2 current
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		roundLimited := func(at time.Duration, limit int64) dialect.TableRotateResult {
			t.Helper()
			return e.rotateWith(&dialect.TableRotateParams{Interval: time.Hour, Size: 1, Hold: time.Minute,
				LockTimeout: 100 * time.Millisecond, StallAfter: 10 * time.Second, DrainLimit: limit, Now: t0.Add(at)})
		}
		round := func(at time.Duration) dialect.TableRotateResult { t.Helper(); return roundLimited(at, 1<<40) }
		pruning := func() bool {
			t.Helper()
			counters, err := e.d.VacuumCounterList(e.ctx, &dialect.VacuumCounterListParams{})
			require.NoError(t, err)
			return len(counters) > 0
		}

		res := round(0) // 1 truncated; the switch to 0 is due and impossible
		require.Equal(t, []int{1}, res.Truncated)
		require.True(t, res.Pinned)
		require.True(t, res.Draining, "a first look is never stuck")
		require.False(t, pruning(), "draining: the prune stays held")
		e.ack(pids[0], 1)
		res = round(5 * time.Second)
		require.True(t, res.Pinned && res.Draining, "no new look before StallAfter")
		res = round(10 * time.Second)
		require.True(t, res.Pinned && res.Draining, "pids[0] moved since the first look")
		require.False(t, pruning())

		// A writer still on generation 0 adds an incoming row there: pending,
		// not moved yet. And pids[0] stops.
		require.NoError(t, e.other().MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rows(pids[1], 1), ChunkRows: 100, ChunkBytes: 1 << 20}))
		res = round(20 * time.Second)
		require.True(t, res.Pinned)
		require.False(t, res.Draining, "pids[0] has not moved for StallAfter")
		require.True(t, pruning(), "stuck: the prune resumes")
		e.ack(pids[0], 2)
		require.False(t, round(25*time.Second).Draining, "no new look before StallAfter")
		res = round(30 * time.Second)
		require.False(t, res.Draining, "pids[0] moved, but pids[1]'s incoming row in generation 0 did not")
		require.True(t, pruning())

		e.moveAll(pids[1])
		e.ack(pids[1], 3)
		e.ack(pids[0], 3)
		res = round(40 * time.Second)
		require.True(t, res.Pinned && res.Draining, "pids[1] is done, pids[0] moved")
		require.False(t, pruning(), "held again")
		res = roundLimited(41*time.Second, 1)
		require.True(t, res.Pinned)
		require.False(t, res.Draining, "the current generation is larger than the limit")
		require.True(t, pruning(), "the prune bounds the current generation")
		e.ack(pids[0], 4)
		res = round(45 * time.Second)
		require.Equal(t, []int{0}, res.Truncated)
		require.True(t, res.Switched)
		require.False(t, res.Pinned || res.Draining)
	})

	t.Run("RefusedWhileTablesInUse", func(t *testing.T) {
		e := newRotateEnv(t, open)
		if e.d.Features().Has(dialect.SingleWriter) {
			t.Skipf("%s: a reader never holds up the truncation (WAL snapshot), and an open writer holds the one write lock, which the rotator waits for as every writer does: nothing to refuse", e.d.Name())
		}
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.True(t, e.rotate(true).Switched)
		e.ack(pid, 2)
		// A reader of the parent (any batch read) holds its generations.
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		var n int
		require.NoError(t, tx.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(e.tb.Body)).Scan(e.ctx, &n))
		require.Equal(t, 2, n)
		res := e.rotate(false)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotateBusy}}, res.Refused)
		require.Empty(t, res.Truncated)
		require.Equal(t, 2, e.count(e.tb.Body, ""), "nothing truncated")
		require.NoError(t, tx.Rollback())
		require.Equal(t, []int{0}, e.rotate(false).Truncated)
	})

	t.Run("StaleWriterLosesNothing", func(t *testing.T) {
		e := newRotateEnv(t, open)
		pid := e.queue(1)[0]
		acked := e.sequenced(1, pid)[pid]
		require.True(t, e.rotate(true).Switched) // 0 closed, 1 current
		e.ack(pid, 1)
		// Whatever a round truncates, an acked message is never reported
		// pending: WaitProcessed reads a body without an outgoing row as
		// a message not yet moved.
		requireNotPending := func(what string) {
			t.Helper()
			pending, err := e.d.MessagePendingList(e.ctx, &dialect.MessagePendingListParams{IDs: acked})
			require.NoError(t, err)
			require.Empty(t, pending, what)
		}

		// Another process that has not read the generation yet writes to
		// 0, closed, in a transaction open across a rotation.
		stale := e.other()
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		rs := rows(pid, 1)
		require.NoError(t, stale.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rs, ChunkRows: 100, ChunkBytes: 1 << 20}))
		if e.d.Features().Has(dialect.SingleWriter) {
			// One writer: tx holds the write lock, so the truncation's write
			// transaction waits for its end instead of being refused busy,
			// and its check then sees the message tx committed.
			type rotated struct {
				res dialect.TableRotateResult
				err error
			}
			done := make(chan rotated, 1)
			go func() {
				res, err := e.r.TableRotate(e.ctx, &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Minute, LockTimeout: 100 * time.Millisecond})
				done <- rotated{res, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the round ended while the writer's transaction held the write lock: %+v, %v", r.res, r.err)
			case <-time.After(200 * time.Millisecond):
			}
			require.NoError(t, tx.Commit())
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, r.res.Refused, "the round waited for the writer's commit, then found its message")
		} else {
			res := e.rotate(false)
			if len(res.Refused) == 0 {
				// Once seen under load in CI and never reproduced: say what the
				// round did and whether the writer's transaction still lives.
				var alive int
				aliveErr := tx.NewRaw("SELECT 1").Scan(e.ctx, &alive)
				t.Fatalf("the writer's transaction holds generation 0, yet the round refused nothing: %+v; states %v; writer's transaction alive: %v",
					res, e.states(), aliveErr)
			}
			require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotateBusy}}, res.Refused, "the writer's transaction holds generation 0")
			requireNotPending("a round refused busy")
			require.NoError(t, tx.Commit())
		}
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, e.rotate(false).Refused, "its message is not moved")
		requireNotPending("a round refused pending")
		e.moveAll(pid)
		// Nothing of generation 0 was truncated: its body table was in use
		// (MariaDB truncates body first, one table at a time).
		require.Equal(t, []int{0, 0}, e.gens(pid), "its outgoing row is in its body's generation")
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, e.rotate(false).Refused, "its message is not acked")
		list, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pid, AfterSeq: 1, Limit: 10})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, rs[0].ID, list[0].ID)
		require.Equal(t, int64(2), list[0].Seq)
		e.ack(pid, 2)
		require.Equal(t, []int{0}, e.rotate(false).Truncated)

		// A writer still on 0 once it is empty: its rows are found there,
		// and 0 opens again in turn.
		stale2 := e.other()
		rs = rows(pid, 1)
		require.NoError(t, stale2.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rs, ChunkRows: 100, ChunkBytes: 1 << 20}))
		e.moveAll(pid)
		require.Equal(t, []int{0}, e.gens(pid))
		list, err = e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pid, AfterSeq: 2, Limit: 10})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, int64(3), list[0].Seq, "seqs stay gap-free")
		e.sequenced(1, pid) // generation 1, current
		require.True(t, e.rotate(true).Switched)
		e.sequenced(1, pid) // generation 2
		res := e.rotate(true)
		require.True(t, res.Switched, "0 was emptied: it opens again, rows and all")
		require.Equal(t, 0, res.Current)
		require.Equal(t, []int{0, 1, 2}, e.gens(pid))
	})

	t.Run("OneMoveAcrossGenerations", func(t *testing.T) {
		// A stale writer's message and a current one's in one partition,
		// moved together: each outgoing row goes to its body's generation,
		// in FIFO order, by the one-partition move and by the several.
		e := newRotateEnv(t, open)
		pids := e.queue(2)
		require.True(t, e.rotate(true).Switched)
		for _, pid := range pids {
			e.insert(rows(pid, 1))
			// A process that has not read the generation writes 0 (its first
			// call starts a read in the background: a new one each time).
			stale := e.other()
			require.NoError(t, stale.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: e.db, Rows: rows(pid, 1), ChunkRows: 100, ChunkBytes: 1 << 20}))
			e.insert(rows(pid, 1))
		}
		e.moveAll(pids[0])
		_, err := e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids[1:], Limit: 100})
		require.NoError(t, err)
		for _, pid := range pids {
			require.Equal(t, []int{1, 0, 1}, e.gens(pid), "partition %d", pid)
			list, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pid, AfterSeq: 0, Limit: 10})
			require.NoError(t, err)
			require.Len(t, list, 3)
			for i, m := range list {
				require.Equal(t, int64(i+1), m.Seq)
				require.Equal(t, "p0", string(m.Payload))
			}
		}
	})

	t.Run("HeldPruneLapses", func(t *testing.T) {
		e := newRotateEnv(t, open)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		e.ack(pid, 2)
		res, err := e.r.TableRotate(e.ctx, &dialect.TableRotateParams{Interval: time.Hour, Hold: time.Millisecond, LockTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		require.False(t, res.Switched)
		// A hold of a millisecond: once it has passed the prune runs again
		// in every process, as it does when the rotator stops.
		deadline := time.Now().Add(10 * time.Second)
		for {
			counters, err := e.d.VacuumCounterList(context.WithoutCancel(e.ctx), &dialect.VacuumCounterListParams{})
			require.NoError(t, err)
			if len(counters) == 1 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the hold did not lapse")
			time.Sleep(5 * time.Millisecond)
		}
	})

	t.Run("RepairsTwoCurrentGenerations", func(t *testing.T) {
		// Two rotators that raced in a release whose switch could change
		// one row left two current generations; the older one, pinned by
		// the rows it holds, stopped the rotation for good. A round closes
		// every current generation but the last, and rotates on.
		e := newRotateEnv(t, open)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		require.Equal(t, []int{0, 0}, e.gens(pid))
		_, err := e.db.NewRaw("UPDATE ? SET state = 'current' WHERE gen = 2", bun.Ident(e.tb.Generations)).Exec(e.ctx)
		require.NoError(t, err)
		res := e.rotate(false)
		require.Equal(t, 2, res.Current)
		require.Equal(t, []dialect.RotateRefusal{{Gen: 0, Reason: dialect.RotatePending}}, res.Refused, "closed, and not acked yet")
		require.Equal(t, []string{"closed", "empty", "current"}, e.states())
		e.ack(pid, 2)
		res = e.rotate(true)
		require.Equal(t, []int{0}, res.Truncated)
		require.True(t, res.Switched)
		require.Equal(t, []string{"current", "empty", "closed"}, e.states())
		e.sequenced(1, pid)
		require.Equal(t, []int{0}, e.gens(pid), "new messages go to the one current generation")
	})
}
