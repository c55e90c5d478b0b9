package conformance

import (
	"database/sql"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
)

// testLeaseGroup: a group lease takes every partition with work and no
// live lease (skipping, not waiting for, a row another transaction holds),
// counts the attempt and reads each batch in order; a group ack advances
// each partition, keeps the lease of one with more work and reads its next
// batch, releases the others, and reports a lost lease for that item alone.
func testLeaseGroup(e *Env) {
	gl, ok := e.D.(engine.GroupLeaser)
	if !ok {
		e.T.Skipf("%s has no group leases: with one writer a group would only lengthen the writer's turn", e.D.Name())
	}
	ob := e.Start(e.Builder().ProducerOnly().Queue("grp", 4, nil))
	pids := ob.PartitionIDs("grp")
	counts := []int{3, 0, 5, 2}
	ids := map[int][]outbox.MessageID{}
	for part, n := range counts {
		for range n {
			id, err := ob.Enqueue(e.Ctx, e.DB, "grp", outbox.Message{Partition: part, PayloadType: "t"})
			require.NoError(e.T, err)
			ids[part] = append(ids[part], id)
		}
	}
	_, err := e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
	require.NoError(e.T, err)

	const owner = "group-owner"
	lease := func(pid int64, limit int) dialect.ProcessorLeaseParams {
		return dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: 30 * time.Second, Limit: limit}
	}
	seqs := func(r dialect.ProcessorLeaseResult) (out []int64) {
		for _, m := range r.Messages {
			out = append(out, m.Seq)
		}
		return out
	}
	// Listed out of partition order: results follow the request's order.
	order := []int{3, 1, 0, 2}
	params := &dialect.ProcessorLeaseGroupParams{}
	for _, part := range order {
		params.Leases = append(params.Leases, lease(pids[part], 2))
	}
	res, err := gl.ProcessorLeaseGroup(e.Ctx, params)
	require.NoError(e.T, err)
	require.Len(e.T, res, 4)
	for i, part := range order {
		if counts[part] == 0 {
			require.False(e.T, res[i].Leased, "partition %d has no work", part)
			continue
		}
		require.True(e.T, res[i].Leased, "partition %d", part)
		require.Equal(e.T, dialect.ProcessorState{}, res[i].State)
		require.Equal(e.T, []int64{1, 2}, seqs(res[i]), "partition %d", part)
		require.Equal(e.T, ids[part][0], res[i].Messages[0].ID)
		require.Equal(e.T, ids[part][1], res[i].Messages[1].ID)
	}
	again, err := gl.ProcessorLeaseGroup(e.Ctx, params)
	require.NoError(e.T, err)
	for i := range again {
		require.False(e.T, again[i].Leased, "a live lease is not taken twice")
	}

	type procRow struct {
		ProcessedSeq int64          `bun:"processed_seq"`
		Attempts     int            `bun:"attempts"`
		LockedBy     sql.NullString `bun:"locked_by"`
	}
	row := func(pid int64) procRow {
		var r procRow
		require.NoError(e.T, e.DB.NewRaw("SELECT processed_seq, attempts, locked_by FROM ? WHERE partition_id = ?",
			bun.Ident(e.Prefix+"processor"), pid).Scan(e.Ctx, &r))
		return r
	}
	require.Equal(e.T, procRow{Attempts: 1, LockedBy: sql.NullString{String: owner, Valid: true}}, row(pids[0]))

	// Partition 2's lease is taken over elsewhere (it expired, say).
	_, err = e.DB.NewRaw("UPDATE ? SET locked_by = 'someone-else' WHERE partition_id = ?", bun.Ident(e.Prefix+"processor"), pids[2]).Exec(e.Ctx)
	require.NoError(e.T, err)
	ack := func(part int, seq int64, limit int) dialect.ProcessorAckLeaseParams {
		next := lease(pids[part], limit)
		return dialect.ProcessorAckLeaseParams{Ack: dialect.ProcessorAdvance(pids[part], owner, seq, nil), Next: &next}
	}
	acked, err := gl.ProcessorAckLeaseGroup(e.Ctx, &dialect.ProcessorAckLeaseGroupParams{Items: []dialect.ProcessorAckLeaseParams{
		ack(3, 2, 5), ack(2, 2, 5), ack(0, 2, 5),
	}})
	require.NoError(e.T, err)
	require.Len(e.T, acked, 3)
	// Partition 3: all done, lease released.
	require.NoError(e.T, acked[0].Err)
	require.False(e.T, acked[0].Lease.Leased)
	require.Equal(e.T, procRow{ProcessedSeq: 2}, row(pids[3]))
	// Partition 2: lost, untouched.
	require.ErrorIs(e.T, acked[1].Err, dialect.ErrLeaseLost)
	require.Equal(e.T, procRow{Attempts: 1, LockedBy: sql.NullString{String: "someone-else", Valid: true}}, row(pids[2]))
	// Partition 0: more work, so the lease is kept and the next batch read.
	require.NoError(e.T, acked[2].Err)
	require.True(e.T, acked[2].Lease.Leased)
	require.Equal(e.T, dialect.ProcessorState{ProcessedSeq: 2}, acked[2].Lease.State)
	require.Equal(e.T, []int64{3}, seqs(acked[2].Lease))
	require.Equal(e.T, ids[0][2], acked[2].Lease.Messages[0].ID)
	require.Equal(e.T, procRow{ProcessedSeq: 2, Attempts: 1, LockedBy: sql.NullString{String: owner, Valid: true}}, row(pids[0]))
	// The lease taken in the same UPDATE as the ack: its own limit and a
	// full lease duration (30 s; any clock skew between here and the
	// database is far below the 20 s margin).
	var kept struct {
		LeaseLimit  int       `bun:"lease_limit"`
		LockedUntil time.Time `bun:"locked_until"`
	}
	require.NoError(e.T, e.DB.NewRaw("SELECT lease_limit, locked_until FROM ? WHERE partition_id = ?",
		bun.Ident(e.Prefix+"processor"), pids[0]).Scan(e.Ctx, &kept))
	require.Equal(e.T, 5, kept.LeaseLimit)
	require.WithinDuration(e.T, time.Now().Add(30*time.Second), kept.LockedUntil, 10*time.Second)

	// A row another transaction holds is skipped, not waited for.
	_, err = e.DB.NewRaw("UPDATE ? SET locked_by = NULL, locked_until = NULL", bun.Ident(e.Prefix+"processor")).Exec(e.Ctx)
	require.NoError(e.T, err)
	other, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(e.T, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.NewRaw("SELECT partition_id FROM ? WHERE partition_id = ? FOR UPDATE", bun.Ident(e.Prefix+"processor"), pids[0]).Exec(e.Ctx)
	require.NoError(e.T, err)
	res, err = gl.ProcessorLeaseGroup(e.Ctx, &dialect.ProcessorLeaseGroupParams{Leases: []dialect.ProcessorLeaseParams{
		lease(pids[0], 10), lease(pids[2], 10),
	}})
	require.NoError(e.T, err)
	require.False(e.T, res[0].Leased, "held by another transaction: skipped")
	require.True(e.T, res[1].Leased)
	require.Equal(e.T, []int64{1, 2, 3, 4, 5}, seqs(res[1]))
	require.Equal(e.T, 1, res[1].State.Attempts, "the first lease, never acked, counted")
}

// testLeaseGroupOwnParams: each lease of a group, and each lease an ack
// group takes again, runs for its own request's duration and records its
// own batch limit. The pool's coalescer groups requests of every queue, so
// a long-lease queue grouped behind a short-lease one once got the short
// lease: its lease expired while its handler still ran.
func testLeaseGroupOwnParams(e *Env) {
	gl, ok := e.D.(engine.GroupLeaser)
	if !ok {
		e.T.Skipf("%s has no group leases: with one writer a group would only lengthen the writer's turn", e.D.Name())
	}
	ob := e.Start(e.Builder().ProducerOnly().Queue("own", 4, nil))
	pids := ob.PartitionIDs("own")
	for part := range pids {
		for range 6 {
			_, err := ob.Enqueue(e.Ctx, e.DB, "own", outbox.Message{Partition: part, PayloadType: "t"})
			require.NoError(e.T, err)
		}
	}
	_, err := e.D.SequenceMoveMany(e.Ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
	require.NoError(e.T, err)

	const owner = "own-owner"
	short, long := 2*time.Second, 300*time.Second
	// The first request of each group is a short one.
	type leaseRow struct {
		LockedBy    string    `bun:"locked_by"`
		LockedUntil time.Time `bun:"locked_until"`
		LeaseLimit  int       `bun:"lease_limit"`
	}
	row := func(part int) leaseRow {
		var r leaseRow
		require.NoError(e.T, e.DB.NewRaw("SELECT locked_by, locked_until, lease_limit FROM ? WHERE partition_id = ?",
			bun.Ident(e.Prefix+"processor"), pids[part]).Scan(e.Ctx, &r))
		return r
	}
	// check: every partition's lease runs for its own duration from a
	// database time between from and to, and records its own limit.
	check := func(what string, durs []time.Duration, limits []int, from, to time.Time) {
		e.T.Helper()
		for part, d := range durs {
			r := row(part)
			require.Equal(e.T, owner, r.LockedBy, "%s: partition %d", what, part)
			if r.LockedUntil.Before(from.Add(d-time.Millisecond)) || r.LockedUntil.After(to.Add(d+time.Millisecond)) {
				e.T.Errorf("%s: partition %d asked for a %v lease and got one ending %v after the database clock at the call (the call took at most %v)",
					what, part, d, r.LockedUntil.Sub(from), to.Sub(from))
			}
		}
		for part, limit := range limits {
			require.Equal(e.T, limit, row(part).LeaseLimit, "%s: partition %d records its own batch limit", what, part)
		}
	}

	durs, limits := []time.Duration{short, long, short, long}, []int{1, 3, 2, 4}
	params := &dialect.ProcessorLeaseGroupParams{}
	for part, pid := range pids {
		params.Leases = append(params.Leases, dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: durs[part], Limit: limits[part]})
	}
	from := dbNow(e)
	res, err := gl.ProcessorLeaseGroup(e.Ctx, params)
	require.NoError(e.T, err)
	to := dbNow(e)
	require.Len(e.T, res, len(pids))
	check("group lease", durs, limits, from, to)
	for part := range pids {
		require.True(e.T, res[part].Leased, "partition %d", part)
		require.Len(e.T, res[part].Messages, limits[part], "partition %d reads its own limit", part)
	}

	// Every partition has more: each ack takes the next lease, with the
	// durations and limits of its own request. The leases may have expired
	// by now (2 s): an ack is guarded by the owner, not the clock.
	nextDurs, nextLimits := []time.Duration{short, long, long, short}, []int{2, 1, 3, 2}
	items := make([]dialect.ProcessorAckLeaseParams, len(pids))
	for part, pid := range pids {
		next := dialect.ProcessorLeaseParams{PartitionID: pid, Owner: owner, Duration: nextDurs[part], Limit: nextLimits[part]}
		items[part] = dialect.ProcessorAckLeaseParams{Ack: dialect.ProcessorAdvance(pid, owner, int64(limits[part]), nil), Next: &next}
	}
	from = dbNow(e)
	acked, err := gl.ProcessorAckLeaseGroup(e.Ctx, &dialect.ProcessorAckLeaseGroupParams{Items: items})
	require.NoError(e.T, err)
	to = dbNow(e)
	require.Len(e.T, acked, len(pids))
	check("group ack and lease", nextDurs, nextLimits, from, to)
	for part := range pids {
		require.NoError(e.T, acked[part].Err, "partition %d", part)
		require.True(e.T, acked[part].Lease.Leased, "partition %d has more", part)
		require.Len(e.T, acked[part].Lease.Messages, nextLimits[part], "partition %d reads its own limit", part)
		require.Equal(e.T, int64(limits[part]+1), acked[part].Lease.Messages[0].Seq, "partition %d", part)
	}
}

// dbNow reads the database clock the way leases do (UTC on MySQL, where
// DATETIME has no zone).
func dbNow(e *Env) time.Time {
	e.T.Helper()
	expr := "CURRENT_TIMESTAMP"
	switch e.D.Name() {
	case dialect.Postgres:
		expr = "now()"
	case dialect.MySQL:
		expr = "UTC_TIMESTAMP(6)"
	}
	var now time.Time
	require.NoError(e.T, e.DB.NewRaw("SELECT "+expr).Scan(e.Ctx, &now))
	return now
}
