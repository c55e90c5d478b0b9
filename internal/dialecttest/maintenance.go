package dialecttest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/vacuum"
)

// testPurgePartition: matching incoming rows deleted, matching sequenced
// ones tombstoned, a live lease's window left alone, dry runs counting.
func testPurgePartition(t *testing.T, open Open) {
	e := newEnv(t, open)
	purge := func(p dialect.PurgeParams) dialect.PurgeResult {
		res, err := e.d.PurgePartition(e.ctx, &p)
		require.NoError(t, err)
		return res
	}
	tenant := func(v string) []dialect.Header { return []dialect.Header{{Key: "tenant", Value: v}} }
	// preview is PurgePreview's count of pid, of the queue pid is in.
	preview := func(pid int64, hs []dialect.Header, window int) dialect.PurgeResult {
		out, err := e.d.PurgePreview(e.ctx, &dialect.PurgePreviewParams{Queue: e.queueName(pid), Headers: hs, LeaseWindow: window})
		require.NoError(t, err)
		return out[pid]
	}
	// enqueue writes a line of headers (tenant a or b, region x) for pid.
	enqueue := func(pid int64, tenants ...string) []dialect.MessageID {
		rs := rows(pid, len(tenants))
		for i, tn := range tenants {
			rs[i].Headers = []byte(`{"tenant":"` + tn + `","region":"x"}`)
		}
		e.insert(rs)
		return idsOf(rs)
	}
	t.Run("UnknownPartition", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("a purge of no partition", func() {
			require.Equal(t, dialect.PurgeResult{}, purge(dialect.PurgeParams{PartitionID: 1 << 40, Headers: tenant("a"), Limit: 10}))
		})
	})
	t.Run("PreviewAndPurge", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		seqd := enqueue(pid, "a", "b", "a", "a") // seqs 1..4
		e.moveAll(pid)
		in := enqueue(pid, "a", "b", "a") // incoming
		// A live lease of 2 from seq 0: seqs 1 and 2 may be in flight.
		require.True(t, e.lease(pid, "o", 2).Leased)

		e.unchanged("a preview", func() {
			res := preview(pid, tenant("a"), 50)
			require.Equal(t, dialect.PurgeResult{Incoming: 2, Outgoing: 2, InFlight: 1}, res)
			res = preview(pid, []dialect.Header{{Key: "tenant", Value: "a"}, {Key: "region", Value: "y"}}, 50)
			require.Equal(t, dialect.PurgeResult{}, res, "every header must match")
			res = preview(pid, tenant("nobody"), 50)
			require.Equal(t, dialect.PurgeResult{}, res)
		})

		res := purge(dialect.PurgeParams{PartitionID: pid, Headers: []dialect.Header{{Key: "tenant", Value: "a"}, {Key: "region", Value: "x"}}, Limit: 1, LeaseWindow: 50})
		require.Equal(t, dialect.PurgeResult{Incoming: 1, Outgoing: 1, InFlight: 1, More: true}, res, "up to Limit of each stage")
		res = purge(dialect.PurgeParams{PartitionID: pid, Headers: tenant("a"), Limit: 10, LeaseWindow: 50})
		require.Equal(t, dialect.PurgeResult{Incoming: 1, Outgoing: 1, InFlight: 1}, res)
		require.Equal(t, dialect.PurgeResult{InFlight: 1}, purge(dialect.PurgeParams{PartitionID: pid, Headers: tenant("a"), Limit: 10, LeaseWindow: 50}), "nothing left")

		// Incoming: a's rows and bodies gone, b's kept.
		var left []outRow
		require.NoError(t, e.db.NewRaw("SELECT body_id FROM ? WHERE partition_id = ? AND "+incomingRows, bun.Ident(e.tb.Incoming), pid).Scan(e.ctx, &left))
		require.Len(t, left, 1)
		require.Equal(t, in[1][:], left[0].BodyID)
		require.Zero(t, e.count(e.tb.Body, "id IN (?)", bun.List([][]byte{in[0][:], in[2][:]})))
		// Outgoing: 3 and 4 tombstones (past the lease's window), 1 in flight, 2 b's.
		var purged []int64
		for _, r := range e.outgoing(pid) {
			if r.Purged != 0 {
				purged = append(purged, r.Seq)
			}
		}
		require.Equal(t, []int64{3, 4}, purged)
		require.Equal(t, 4, e.count(e.tb.Body, "id IN (?)", bun.List([][]byte{seqd[0][:], seqd[1][:], seqd[2][:], seqd[3][:]})), "a tombstone keeps its body row")
		msgs, err := e.d.OutgoingList(e.ctx, &dialect.OutgoingListParams{Conn: e.db, PartitionID: pid, AfterSeq: 0, Limit: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 4)
		for _, m := range msgs {
			require.Equal(t, m.Seq >= 3, m.Purged, "seq %d", m.Seq)
			if m.Purged {
				require.Empty(t, m.Payload, "a tombstone's data is blanked")
				require.Empty(t, m.Headers)
				require.Equal(t, seqd[m.Seq-1], m.ID, "its id stays")
			}
		}
		require.Equal(t, int64(4), e.sequence(pid), "seqs stay gap-free")

		// The lease gone: the in-flight one is purged too.
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pid, Owner: "o"}))
		require.Equal(t, dialect.PurgeResult{Outgoing: 1}, purge(dialect.PurgeParams{PartitionID: pid, Headers: tenant("a"), Limit: 10, LeaseWindow: 50}))
	})
	t.Run("LeaseWindowDefault", func(t *testing.T) {
		// A live lease that recorded no limit (taken before lease_limit
		// existed): LeaseWindow stands in for it.
		e := e.with(t)
		pid := e.queue(1)[0]
		enqueue(pid, "a", "a", "a", "a")
		e.moveAll(pid)
		require.True(t, e.lease(pid, "o", 1).Leased)
		_, err := e.db.NewRaw("UPDATE ? SET lease_limit = NULL WHERE partition_id = ?", bun.Ident(e.tb.Processor), pid).Exec(e.ctx)
		require.NoError(t, err)
		res := preview(pid, tenant("a"), 3)
		require.Equal(t, dialect.PurgeResult{Outgoing: 1, InFlight: 3}, res)
		// Expired: no window.
		e.expireLease(pid)
		res = preview(pid, tenant("a"), 3)
		require.Equal(t, dialect.PurgeResult{Outgoing: 4}, res)
	})
}

// testVacuumCounterList: partitions whose cursor is past what was pruned.
func testVacuumCounterList(t *testing.T, open Open) {
	e := newEnv(t, open)
	list := func() []dialect.VacuumCounter {
		out, err := e.d.VacuumCounterList(e.ctx, &dialect.VacuumCounterListParams{})
		require.NoError(t, err)
		slices.SortFunc(out, func(a, b dialect.VacuumCounter) int { return int(a.PartitionID - b.PartitionID) })
		return out
	}
	require.Empty(t, list())
	pids := e.queue(3)
	e.sequenced(3, pids...)
	require.Empty(t, list(), "nothing processed")
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[0], "", 2, nil)))
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[2], "", 3, nil)))
	require.Equal(t, []dialect.VacuumCounter{{PartitionID: pids[0], ProcessedSeq: 2}, {PartitionID: pids[2], ProcessedSeq: 3}}, list())
	_, err := e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: []dialect.VacuumRange{{PartitionID: pids[0], FromSeq: 0, ToSeq: 1}}})
	require.NoError(t, err)
	require.Equal(t, []dialect.VacuumCounter{{PartitionID: pids[0], PrunedSeq: 1, ProcessedSeq: 2}, {PartitionID: pids[2], ProcessedSeq: 3}}, list())
}

// testVacuumDelete: every range's outgoing and body rows, pruned_seq
// recorded (never moved back), in one call.
func testVacuumDelete(t *testing.T, open Open) {
	e := newEnv(t, open)
	del := func(rs ...dialect.VacuumRange) int {
		n, err := e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: rs})
		require.NoError(t, err)
		return n
	}
	pruned := func(pid int64) int64 {
		var s int64
		require.NoError(t, e.db.NewRaw("SELECT pruned_seq FROM ? WHERE partition_id = ?", bun.Ident(e.tb.VacuumCounter), pid).Scan(e.ctx, &s))
		return s
	}
	t.Run("NoRanges", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(2, pid)
		e.unchanged("a vacuum of no range", func() {
			require.Zero(t, del())
			require.Zero(t, del([]dialect.VacuumRange{}...))
		})
	})
	t.Run("Ranges", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(3)
		ids := e.sequenced(4, pids...)
		for _, pid := range pids {
			require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "", 4, nil)))
		}
		require.Equal(t, 5, del(dialect.VacuumRange{PartitionID: pids[0], FromSeq: 0, ToSeq: 2}, dialect.VacuumRange{PartitionID: pids[1], FromSeq: 1, ToSeq: 4}))
		require.Equal(t, []int64{3, 4}, seqsOfRows(e.outgoing(pids[0])))
		require.Equal(t, []int64{1}, seqsOfRows(e.outgoing(pids[1])), "from is exclusive")
		require.Len(t, e.outgoing(pids[2]), 4, "a partition not asked for")
		require.Zero(t, e.count(e.tb.Body, "id IN (?)", bun.List([][]byte{ids[pids[0]][0][:], ids[pids[0]][1][:], ids[pids[1]][1][:], ids[pids[1]][3][:]})), "bodies too")
		require.Equal(t, 2, e.count(e.tb.Body, "id IN (?)", bun.List([][]byte{ids[pids[0]][2][:], ids[pids[1]][0][:]})))
		require.Equal(t, []int64{2, 4, 0}, []int64{pruned(pids[0]), pruned(pids[1]), pruned(pids[2])})
		// An older range (a sweep of another process) never moves it back,
		// and a range with nothing left deletes nothing.
		require.Zero(t, del(dialect.VacuumRange{PartitionID: pids[1], FromSeq: 1, ToSeq: 3}))
		require.Equal(t, int64(4), pruned(pids[1]))
		require.Equal(t, 1, del(dialect.VacuumRange{PartitionID: pids[1], FromSeq: 0, ToSeq: 1}))
		require.Equal(t, int64(4), pruned(pids[1]))
	})
}

func seqsOfRows(rs []outRow) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

// testTableVacuum (vacuum.TableVacuumer): runs, or says why not.
func testTableVacuum(t *testing.T, open Open) {
	e := newEnv(t, open)
	tv, ok := e.d.(vacuum.TableVacuumer)
	if !ok {
		t.Skipf("%s reclaims space by itself (no vacuum.TableVacuumer)", e.d.Name())
	}
	res, err := tv.TableVacuum(e.ctx, &dialect.TableVacuumParams{})
	require.NoError(t, err)
	require.True(t, res.Vacuumed || res.Reason != "", "vacuumed, or a reason: %+v", res)
}

// testPartitionStats: every partition's backlog figures, and one's.
func testPartitionStats(t *testing.T, open Open) {
	e := newEnv(t, open)
	stats := func() map[int64]dialect.PartitionStats {
		out, err := e.d.PartitionStats(e.ctx, &dialect.PartitionStatsParams{})
		require.NoError(t, err)
		m := map[int64]dialect.PartitionStats{}
		for _, s := range out {
			m[s.PartitionID] = s
		}
		require.Len(t, m, len(out))
		return m
	}
	require.Empty(t, stats())
	pids := e.queue(4)
	// 0: 3 sequenced, 1 acked, 2 incoming, leased. 1: idle. 2: retrying. 3: parked.
	e.sequenced(3, pids[0], pids[2], pids[3])
	e.enqueue(pids[0], 2)
	require.True(t, e.lease(pids[0], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pids[0], "o", 1, nil)))
	require.True(t, e.lease(pids[0], "o", 1).Leased)
	require.True(t, e.lease(pids[2], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[2], "o", 0, 2, "boom", time.Hour, nil)))
	require.True(t, e.lease(pids[3], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[3], Owner: "o", Attempts: 4, LastError: "stuck", Park: true}))

	var s map[int64]dialect.PartitionStats
	e.unchanged("stats", func() { s = stats() })
	q := e.queueName(pids[0])
	s0 := s[pids[0]]
	require.Equal(t, q, s0.Queue)
	require.Equal(t, 0, s0.Partition)
	require.Equal(t, int64(2), s0.Incoming)
	require.Equal(t, int64(3), s0.Sequence)
	require.Equal(t, int64(1), s0.ProcessedSeq)
	require.Equal(t, 1, s0.Attempts)
	require.False(t, s0.OldestIncoming.IsZero())
	require.False(t, s0.OldestOutgoing.IsZero(), "seq 2 waits")
	require.False(t, s0.LockedUntil.IsZero())
	require.True(t, s0.NextAttemptAt.IsZero())
	require.True(t, s0.ParkedAt.IsZero())

	s1 := s[pids[1]]
	require.Equal(t, dialect.PartitionStats{PartitionID: pids[1], Queue: q, Partition: 1}, s1, "idle: nothing but its name")

	s2 := s[pids[2]]
	require.Equal(t, 2, s2.Attempts)
	require.Equal(t, "boom", s2.LastError)
	require.False(t, s2.NextAttemptAt.IsZero())
	require.True(t, s2.LockedUntil.IsZero(), "released")
	require.True(t, s2.OldestIncoming.IsZero())
	require.False(t, s2.OldestOutgoing.IsZero())

	s3 := s[pids[3]]
	require.False(t, s3.ParkedAt.IsZero())
	require.Equal(t, "stuck", s3.LastError)
	require.Equal(t, 3, s3.Partition)

	for _, pid := range pids {
		one, err := e.d.PartitionStats(e.ctx, &dialect.PartitionStatsParams{PartitionID: pid})
		require.NoError(t, err)
		require.Equal(t, []dialect.PartitionStats{s[pid]}, one, "one partition's figures are its row of all")
	}
	none, err := e.d.PartitionStats(e.ctx, &dialect.PartitionStatsParams{PartitionID: pids[3] + 1000})
	require.NoError(t, err)
	require.Empty(t, none)
}
