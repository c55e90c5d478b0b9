package dialecttest

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// testIncomingPartitionList: the partitions with incoming rows.
func testIncomingPartitionList(t *testing.T, open Open) {
	e := newEnv(t, open)
	list := func() []int64 {
		out, err := e.d.IncomingPartitionList(e.ctx, &dialect.IncomingPartitionListParams{})
		require.NoError(t, err)
		slices.Sort(out)
		return out
	}
	require.Empty(t, list(), "no partition")
	pids := e.queue(3)
	require.Empty(t, list(), "no incoming row")
	e.enqueue(pids[0], 2)
	e.enqueue(pids[2], 1)
	require.Equal(t, []int64{pids[0], pids[2]}, list())
	e.moveAll(pids[0])
	require.Equal(t, []int64{pids[2]}, list())
	e.moveAll(pids[2])
	require.Empty(t, list(), "moved rows are not incoming")
}

// testSequenceMove: one partition's committed incoming rows to outgoing,
// in order, with gap-free seqs.
func testSequenceMove(t *testing.T, open Open) {
	e := newEnv(t, open)
	move := func(pid int64, limit int) dialect.SequenceMoveResult {
		res, err := e.d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: limit})
		require.NoError(t, err)
		require.Equal(t, pid, res.PartitionID)
		return res
	}
	t.Run("Empty", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		res := move(pid, 10)
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pid}, res)
		require.Zero(t, e.sequence(pid))
		require.Empty(t, e.outgoing(pid))
	})
	t.Run("Batches", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(2)
		ids := e.enqueue(pids[0], 5)
		e.enqueue(pids[1], 2)
		res := move(pids[0], 3)
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[0], Moved: 3, FirstSeq: 1, LastSeq: 3}, res)
		require.Equal(t, int64(3), e.sequence(pids[0]))
		require.Equal(t, ids[:3], e.outgoingIDs(pids[0]), "in enqueue order")
		require.Equal(t, 2, e.incoming(pids[0]), "the moved rows left incoming")
		require.Equal(t, 2, e.incoming(pids[1]), "another partition's rows stay")
		more := e.enqueue(pids[0], 1)
		res = move(pids[0], 10)
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[0], Moved: 3, FirstSeq: 4, LastSeq: 6}, res)
		require.Equal(t, append(ids, more...), e.outgoingIDs(pids[0]))
		require.Zero(t, e.incoming(pids[0]))
		require.Equal(t, int64(6), e.sequence(pids[0]))
		res = move(pids[0], 10)
		require.Zero(t, res.Moved)
		require.Equal(t, int64(6), e.sequence(pids[0]))
		require.Equal(t, 2, e.incoming(pids[1]))
	})
	t.Run("AfterPrune", func(t *testing.T) {
		// No row keeps the last seq handed out: it is the top of outgoing
		// or, once the vacuum has pruned every row, the cursor. Every shape
		// of move continues from it, never from seq 1 again.
		e := e.with(t)
		pid := e.queue(1)[0]
		for round, shape := range []string{"move", "many", "move", "many"} {
			e.enqueue(pid, 2)
			first := int64(2*round + 1)
			var res dialect.SequenceMoveResult
			if shape == "many" {
				out, err := e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: []int64{pid}, Limit: 10})
				require.NoError(t, err)
				res = out[0]
			} else {
				res = move(pid, 10)
			}
			require.Equal(t, dialect.SequenceMoveResult{PartitionID: pid, Moved: 2, FirstSeq: first, LastSeq: first + 1}, res, "round %d (%s)", round, shape)
			require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "", first+1, nil)))
			n, err := e.d.VacuumDelete(e.ctx, &dialect.VacuumDeleteParams{Ranges: []dialect.VacuumRange{{PartitionID: pid, FromSeq: first - 1, ToSeq: first + 1}}})
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Empty(t, e.outgoing(pid), "round %d: pruned whole", round)
			stats, err := e.d.PartitionStats(e.ctx, &dialect.PartitionStatsParams{PartitionID: pid})
			require.NoError(t, err)
			require.Equal(t, first+1, stats[0].Sequence, "round %d: the cursor is the last seq handed out", round)
		}
	})
	t.Run("NoProcessorRow", func(t *testing.T) {
		// Without its processor row (registration writes both in one
		// transaction) a partition's last seq handed out is unknown: every
		// shape of move fails and leaves the rows where they are, never
		// numbering them from 1 again nor deleting them unmoved.
		e := e.with(t)
		pid := e.queue(1)[0]
		e.enqueue(pid, 2)
		_, err := e.db.NewRaw("DELETE FROM ? WHERE partition_id = ?", bun.Ident(e.tb.Processor), pid).Exec(e.ctx)
		require.NoError(t, err)
		_, err = e.d.SequenceMove(e.ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
		require.Error(t, err)
		_, err = e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: []int64{pid}, Limit: 10})
		require.Error(t, err)
		require.Equal(t, 2, e.incoming(pid))
		require.Empty(t, e.outgoing(pid))
	})
	t.Run("PartitionRowNotRewritten", func(t *testing.T) {
		// No move writes a version of the partition's row (PostgreSQL):
		// each would stay, under a held snapshot, in the chain every lock
		// and lookup of the row walks. The lower bound is a row of its own
		// table, replaced when it moves, one live row per partition; under
		// a held transaction that has an xid it stops at it.
		e := e.with(t)
		if e.d.Name() != dialect.Postgres {
			t.Skipf("%s: no lower bound and no row versions to see", e.d.Name())
		}
		pids := e.queue(2)
		held, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		defer func() { _ = held.Rollback() }()
		var xid int64
		require.NoError(t, held.NewRaw("SELECT (pg_current_xact_id()::text)::bigint").Scan(e.ctx, &xid))
		version := func() []string {
			var v []string
			require.NoError(t, e.db.NewRaw("SELECT ctid::text || ' ' || xmin::text FROM ? WHERE id IN (?) ORDER BY id",
				bun.Ident(e.tb.Partitions), bun.List(pids)).Scan(e.ctx, &v))
			return v
		}
		bounds := bun.Ident(e.tb.Partitions + "_bound")
		bound := func(pid int64) int64 {
			var b []int64
			require.NoError(t, e.db.NewRaw("SELECT (xid::text)::bigint FROM ? WHERE partition_id = ?", bounds, pid).Scan(e.ctx, &b))
			require.LessOrEqual(t, len(b), 1, "one live bound per partition")
			if len(b) == 0 {
				return 0
			}
			return b[0]
		}
		before := version()
		// Moves raise each bound up to the held transaction's xid (older
		// transactions of other tests may hold it lower for a while).
		for _, pid := range pids {
			for bound(pid) < xid {
				e.enqueue(pid, 1)
				move(pid, 10)
			}
			require.Equal(t, xid, bound(pid), "the bound never passes a running transaction")
		}
		require.Equal(t, before, version(), "a move that raised its bound rewrote a partition row")
		seq := e.sequence(pids[0])
		for _, shape := range []string{"move", "many", "move"} {
			e.enqueue(pids[0], 2)
			e.enqueue(pids[1], 1)
			if shape == "many" {
				out, err := e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: 10})
				require.NoError(t, err)
				require.Equal(t, 2, out[0].Moved)
				require.Equal(t, 1, out[1].Moved)
			} else {
				require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[0], Moved: 2, FirstSeq: seq + 1, LastSeq: seq + 2}, move(pids[0], 10))
				require.Equal(t, 1, move(pids[1], 10).Moved)
			}
			seq += 2
			require.Equal(t, before, version(), "%s: a move rewrote a partition row", shape)
		}
		require.Equal(t, seq, e.sequence(pids[0]))
	})
	t.Run("PartitionLocked", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		pid := e.queue(1)[0]
		e.enqueue(pid, 2)
		_, release := e.holdRow(e.tb.Partitions, "id", pid)
		res := move(pid, 10)
		require.True(t, res.Skipped, "another sequencer holds the partition")
		require.Zero(t, res.Moved)
		require.Equal(t, 2, e.incoming(pid))
		require.Empty(t, e.outgoing(pid))
		release(false)
		require.Equal(t, 2, move(pid, 10).Moved)
	})
	t.Run("UncommittedRows", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		pid := e.queue(1)[0]
		first := e.enqueue(pid, 1)
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		late := rows(pid, 2)
		require.NoError(t, e.d.MessageInsertMany(e.ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: late, ChunkRows: 10, ChunkBytes: 1 << 20}))
		after := e.enqueue(pid, 1)
		res := move(pid, 10)
		require.Equal(t, 2, res.Moved, "the committed rows, not waiting for the open producer")
		require.Equal(t, append(first, after...), e.outgoingIDs(pid))
		require.NoError(t, tx.Commit())
		res = move(pid, 10)
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pid, Moved: 2, FirstSeq: 3, LastSeq: 4}, res)
		require.Equal(t, append(append(first, after...), idsOf(late)...), e.outgoingIDs(pid), "sequenced at commit")
	})
}

// testSequenceMoveMany: several partitions in one transaction, a result
// each in the order given.
func testSequenceMoveMany(t *testing.T, open Open) {
	e := newEnv(t, open)
	many := func(limit int, pids ...int64) []dialect.SequenceMoveResult {
		out, err := e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: pids, Limit: limit})
		require.NoError(t, err)
		require.Len(t, out, len(pids))
		for i, r := range out {
			require.Equal(t, pids[i], r.PartitionID, "result %d in the order given", i)
		}
		return out
	}
	t.Run("NoPartitions", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.enqueue(pid, 1)
		e.unchanged("a move of no partition", func() {
			out, err := e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: nil, Limit: 10})
			require.NoError(t, err)
			require.Empty(t, out)
			out, err = e.d.SequenceMoveMany(e.ctx, &dialect.SequenceMoveManyParams{PartitionIDs: []int64{}, Limit: 10})
			require.NoError(t, err)
			require.Empty(t, out)
		})
	})
	t.Run("Several", func(t *testing.T) {
		e := e.with(t)
		pids := e.queue(3)
		a := e.enqueue(pids[0], 4)
		c := e.enqueue(pids[2], 1)
		out := many(3, pids[2], pids[1], pids[0])
		require.Equal(t, []dialect.SequenceMoveResult{
			{PartitionID: pids[2], Moved: 1, FirstSeq: 1, LastSeq: 1},
			{PartitionID: pids[1]},
			{PartitionID: pids[0], Moved: 3, FirstSeq: 1, LastSeq: 3},
		}, out)
		require.Equal(t, a[:3], e.outgoingIDs(pids[0]))
		require.Equal(t, c, e.outgoingIDs(pids[2]))
		require.Equal(t, []int64{3, 0, 1}, []int64{e.sequence(pids[0]), e.sequence(pids[1]), e.sequence(pids[2])})
		out = many(3, pids[0], pids[2])
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[0], Moved: 1, FirstSeq: 4, LastSeq: 4}, out[0])
		require.Zero(t, out[1].Moved)
		require.Equal(t, a, e.outgoingIDs(pids[0]))
	})
	t.Run("PartitionLocked", func(t *testing.T) {
		e := e.with(t)
		e.needRowLocks()
		pids := e.queue(3)
		for _, pid := range pids {
			e.enqueue(pid, 2)
		}
		_, release := e.holdRow(e.tb.Partitions, "id", pids[1])
		out := many(10, pids...)
		require.False(t, out[0].Skipped)
		require.Equal(t, 2, out[0].Moved)
		require.True(t, out[1].Skipped, "held by another transaction")
		require.Zero(t, out[1].Moved)
		require.Equal(t, 2, out[2].Moved)
		require.Equal(t, 2, e.incoming(pids[1]))
		require.Zero(t, e.sequence(pids[1]))
		release(false)
		out = many(10, pids[1])
		require.Equal(t, dialect.SequenceMoveResult{PartitionID: pids[1], Moved: 2, FirstSeq: 1, LastSeq: 2}, out[0])
	})
}
