package dialecttest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// testDeadLetters: list, tally, update and delete, by every filter field
// alone and combined.
func testDeadLetters(t *testing.T, open Open) {
	e := newEnv(t, open)
	pids := e.queue(2)
	ids := e.sequenced(3, pids...)
	// Six letters: partition 0 seqs 1..3 (types a, b, a), partition 1 seqs
	// 1..3 (types b, a, b); each partition's errors are "db timeout",
	// "Timeout on <b>", "refused" and its header tenant is t0 or t1.
	var letters []dialect.DeadLetter
	for k, pid := range pids {
		dls := make([]dialect.DeadLetter, 3)
		for i := range dls {
			typ := []string{"a", "b"}[(i+k)%2]
			dls[i] = deadLetter(pid, int64(i+1), ids[pid][i], typ)
			dls[i].LastError = []string{"db timeout", "Timeout on <b>", "refused"}[i]
			dls[i].Headers = fmt.Appendf(nil, `{"h":"v","tenant":"t%d"}`, k)
		}
		require.True(t, e.lease(pid, "o", 3).Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "o", 3, dls)))
		letters = append(letters, dls...)
	}
	all := make([]int64, len(letters))
	for i, l := range letters {
		all[i] = l.ID
	}
	require.True(t, slices.IsSorted(all))
	// Failed at day i+1 of 2020; letters 4 and 5 completed on days 10 and 20.
	for i, id := range all {
		_, err := e.db.NewRaw("UPDATE ? SET failed_at = ? WHERE id = ?", bun.Ident(e.tb.DeadLetters), e.timeArg(day(i+1)), id).Exec(e.ctx)
		require.NoError(t, err)
	}
	_, err := e.db.NewRaw("UPDATE ? SET status = ?, completed_at = ? WHERE id = ?", bun.Ident(e.tb.DeadLetters), dialect.DeadLetterDiscarded, e.timeArg(day(10)), all[4]).Exec(e.ctx)
	require.NoError(t, err)
	_, err = e.db.NewRaw("UPDATE ? SET status = ?, completed_at = ? WHERE id = ?", bun.Ident(e.tb.DeadLetters), dialect.DeadLetterResolved, e.timeArg(day(20)), all[5]).Exec(e.ctx)
	require.NoError(t, err)

	list := func(p dialect.DeadLetterListParams) []int64 {
		out, err := e.d.DeadLetterList(e.ctx, &p)
		require.NoError(t, err)
		got := make([]int64, len(out))
		for i, r := range out {
			got[i] = r.ID
		}
		require.True(t, slices.IsSorted(got), "in id order")
		return got
	}
	tally := func(f dialect.DeadLetterFilter) dialect.DeadLetterTally {
		out, err := e.d.DeadLetterTally(e.ctx, &dialect.DeadLetterTallyParams{Filter: f})
		require.NoError(t, err)
		return out
	}
	pick := func(is ...int) []int64 {
		out := []int64{}
		for _, i := range is {
			out = append(out, all[i])
		}
		return out
	}
	mid := letters[3].MessageID
	cases := []struct {
		name  string
		f     dialect.DeadLetterFilter
		want  []int64
		tally map[string]int64
	}{
		{"Any", dialect.DeadLetterFilter{}, all, map[string]int64{"pending": 4, "discarded": 1, "resolved": 1}},
		{"IDs", dialect.DeadLetterFilter{IDs: pick(0, 4)}, pick(0, 4), map[string]int64{"pending": 1, "discarded": 1}},
		{"IDsEmpty", dialect.DeadLetterFilter{IDs: []int64{}}, pick(), map[string]int64{}},
		{"PartitionIDs", dialect.DeadLetterFilter{PartitionIDs: pids[1:]}, pick(3, 4, 5), map[string]int64{"pending": 1, "discarded": 1, "resolved": 1}},
		{"PartitionIDsEmpty", dialect.DeadLetterFilter{PartitionIDs: []int64{}}, pick(), map[string]int64{}},
		{"Statuses", dialect.DeadLetterFilter{Statuses: []string{dialect.DeadLetterDiscarded, dialect.DeadLetterResolved}}, pick(4, 5), map[string]int64{"discarded": 1, "resolved": 1}},
		{"PayloadType", dialect.DeadLetterFilter{PayloadType: "b"}, pick(1, 3, 5), map[string]int64{"pending": 2, "resolved": 1}},
		{"MessageID", dialect.DeadLetterFilter{MessageID: &mid}, pick(3), map[string]int64{"pending": 1}},
		{"FailedFrom", dialect.DeadLetterFilter{FailedFrom: day(5)}, pick(4, 5), map[string]int64{"discarded": 1, "resolved": 1}},
		{"FailedTo", dialect.DeadLetterFilter{FailedTo: day(2)}, pick(0), map[string]int64{"pending": 1}},
		{"CompletedTo", dialect.DeadLetterFilter{CompletedTo: day(15)}, pick(4), map[string]int64{"discarded": 1}},
		{"Combined", dialect.DeadLetterFilter{IDs: all, PartitionIDs: pids, Statuses: []string{dialect.DeadLetterPending},
			PayloadType: "a", FailedFrom: day(2), FailedTo: day(6)}, pick(2), map[string]int64{"pending": 1}},
		{"CombinedNone", dialect.DeadLetterFilter{PartitionIDs: pids[:1], MessageID: &mid}, pick(), map[string]int64{}},
		{"ErrorText", dialect.DeadLetterFilter{ErrorText: "timeout"}, pick(0, 3), map[string]int64{"pending": 2}},
		{"ErrorTextCase", dialect.DeadLetterFilter{ErrorText: "Timeout"}, pick(1, 4), map[string]int64{"pending": 1, "discarded": 1}},
		{"ErrorTextMarkup", dialect.DeadLetterFilter{ErrorText: "on <b>"}, pick(1, 4), map[string]int64{"pending": 1, "discarded": 1}},
		{"ErrorTextNone", dialect.DeadLetterFilter{ErrorText: "TIMEOUT"}, pick(), map[string]int64{}},
		{"Header", dialect.DeadLetterFilter{Headers: []byte(`{"tenant":"t1"}`)}, pick(3, 4, 5), map[string]int64{"pending": 1, "discarded": 1, "resolved": 1}},
		{"Headers", dialect.DeadLetterFilter{Headers: []byte(`{"tenant":"t0","h":"v"}`)}, pick(0, 1, 2), map[string]int64{"pending": 3}},
		{"HeadersNone", dialect.DeadLetterFilter{Headers: []byte(`{"tenant":"t0","h":"x"}`)}, pick(), map[string]int64{}},
		{"MaxID", dialect.DeadLetterFilter{MaxID: all[2]}, pick(0, 1, 2), map[string]int64{"pending": 3}},
		{"CombinedNew", dialect.DeadLetterFilter{ErrorText: "timeout", Headers: []byte(`{"tenant":"t1"}`), MaxID: all[3]}, pick(3), map[string]int64{"pending": 1}},
	}
	t.Run("ListAndTally", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("lists and tallies", func() {
			for _, c := range cases {
				require.Equal(t, c.want, list(dialect.DeadLetterListParams{Filter: c.f}), "list %s", c.name)
				require.Equal(t, c.want, list(dialect.DeadLetterListParams{Filter: c.f, IDsOnly: true}), "ids only %s", c.name)
				got := tally(c.f)
				require.Equal(t, c.tally, got.ByStatus, "tally %s", c.name)
				wantMax := int64(0)
				if len(c.want) > 0 {
					wantMax = c.want[len(c.want)-1]
				}
				require.Equal(t, wantMax, got.MaxID, "tally's highest id %s", c.name)
			}
		})
	})
	t.Run("Pages", func(t *testing.T) {
		require.Equal(t, pick(0, 1), list(dialect.DeadLetterListParams{Limit: 2}))
		require.Equal(t, pick(2, 3), list(dialect.DeadLetterListParams{AfterID: all[1], Limit: 2}))
		require.Equal(t, pick(4, 5), list(dialect.DeadLetterListParams{AfterID: all[3]}))
		require.Empty(t, list(dialect.DeadLetterListParams{AfterID: all[5]}))
		out, err := e.d.DeadLetterList(e.ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{IDs: pick(4)}, IDsOnly: true})
		require.NoError(t, err)
		require.Equal(t, dialect.DeadLetterDiscarded, out[0].Status, "ids only carries the status")
	})
	t.Run("ListLockInTransaction", func(t *testing.T) {
		require.NoError(t, e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			out, err := e.d.DeadLetterList(ctx, &dialect.DeadLetterListParams{Conn: tx, Filter: dialect.DeadLetterFilter{PartitionIDs: pids[:1]}, Lock: true})
			require.NoError(t, err)
			require.Len(t, out, 3)
			return nil
		}))
	})
	t.Run("DeadLetterCount", func(t *testing.T) {
		out, err := e.d.DeadLetterCount(e.ctx, &dialect.DeadLetterCountParams{})
		require.NoError(t, err)
		require.ElementsMatch(t, []dialect.DeadLetterCount{
			{PartitionID: pids[0], Status: "pending", Count: 3},
			{PartitionID: pids[1], Status: "pending", Count: 1},
			{PartitionID: pids[1], Status: "discarded", Count: 1},
			{PartitionID: pids[1], Status: "resolved", Count: 1},
		}, out)
		out, err = e.d.DeadLetterCount(e.ctx, &dialect.DeadLetterCountParams{PartitionID: pids[0]})
		require.NoError(t, err)
		require.Equal(t, []dialect.DeadLetterCount{{PartitionID: pids[0], Status: "pending", Count: 3}}, out, "one partition's")
	})
	update := func(p dialect.DeadLetterUpdateParams) int {
		p.Conn = e.db
		n, err := e.d.DeadLetterUpdate(e.ctx, &p)
		require.NoError(t, err)
		return n
	}
	get := func(id int64) dialect.DeadLetterRecord {
		out, err := e.d.DeadLetterList(e.ctx, &dialect.DeadLetterListParams{Filter: dialect.DeadLetterFilter{IDs: []int64{id}}})
		require.NoError(t, err)
		require.Len(t, out, 1)
		return out[0]
	}
	t.Run("UpdateNoIDs", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("an update of no letter", func() {
			require.Zero(t, update(dialect.DeadLetterUpdateParams{IDs: nil, From: "pending", To: "resolved"}))
			require.Zero(t, update(dialect.DeadLetterUpdateParams{IDs: []int64{}, From: "pending", To: "resolved"}))
		})
	})
	t.Run("Update", func(t *testing.T) {
		// Only the letters still in From move.
		require.Equal(t, 1, update(dialect.DeadLetterUpdateParams{IDs: pick(0, 4), From: "pending", To: "resolved", Note: "fixed"}))
		r := get(all[0])
		require.Equal(t, "resolved", r.Status)
		require.Equal(t, "fixed", r.Note)
		require.NotNil(t, r.CompletedAt, "a final status completes it")
		require.Equal(t, "discarded", get(all[4]).Status, "not in From: unchanged")
		require.Zero(t, update(dialect.DeadLetterUpdateParams{IDs: pick(0), From: "pending", To: "discarded"}), "of two operators, one wins")

		// Replayed: each letter its own replay id.
		replays := newIDs(2)
		require.Equal(t, 2, update(dialect.DeadLetterUpdateParams{IDs: pick(1, 2), From: "pending", To: "replayed", ReplayIDs: replays}))
		for i, id := range pick(1, 2) {
			r := get(id)
			require.Equal(t, "replayed", r.Status)
			require.NotNil(t, r.ReplayID)
			require.Equal(t, replays[i], *r.ReplayID)
			require.Nil(t, r.CompletedAt)
		}
	})
	t.Run("DeleteNoIDs", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("a delete of no letter", func() {
			for _, ids := range [][]int64{nil, {}} {
				n, err := e.d.DeadLetterDelete(e.ctx, &dialect.DeadLetterDeleteParams{Conn: e.db, IDs: ids})
				require.NoError(t, err)
				require.Zero(t, n)
			}
		})
	})
	t.Run("Delete", func(t *testing.T) {
		n, err := e.d.DeadLetterDelete(e.ctx, &dialect.DeadLetterDeleteParams{Conn: e.db, IDs: append(pick(4, 5), 1<<40)})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, pick(0, 1, 2, 3), list(dialect.DeadLetterListParams{}))
		tx, err := e.db.BeginTx(e.ctx, nil)
		require.NoError(t, err)
		n, err = e.d.DeadLetterDelete(e.ctx, &dialect.DeadLetterDeleteParams{Conn: tx, IDs: pick(0)})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, tx.Rollback())
		require.Equal(t, pick(0, 1, 2, 3), list(dialect.DeadLetterListParams{}), "on the caller's transaction")
	})
}

func day(d int) time.Time { return time.Date(2020, 1, d, 0, 0, 0, 0, time.UTC) }

// timeArg is a time as the dialect stores it: SQLite compares the text,
// in the dialect's own layout.
func (e *env) timeArg(t time.Time) any {
	if e.d.Name() == dialect.SQLite {
		return t.UTC().Format("2006-01-02 15:04:05.000")
	}
	return t
}

// testProcessorFailingList: parked and retrying partitions with their
// head's failures.
func testProcessorFailingList(t *testing.T, open Open) {
	e := newEnv(t, open)
	failing := func() []dialect.ProcessorAdminState {
		out, err := e.d.ProcessorFailingList(e.ctx, &dialect.ProcessorFailingListParams{})
		require.NoError(t, err)
		return out
	}
	require.Empty(t, failing())
	pids := e.queue(4)
	e.sequenced(2, pids...)
	require.Empty(t, failing(), "all healthy")
	// 0 healthy, 1 retrying, 2 parked, 3 failed and leased again.
	require.True(t, e.lease(pids[1], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[1], "o", 0, 1, "once", time.Hour, nil)))
	require.True(t, e.lease(pids[2], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[2], Owner: "o", ProcessedSeq: 1, Attempts: 3, LastError: "thrice", Park: true}))
	require.True(t, e.lease(pids[3], "o", 1).Leased)
	require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorFailure(pids[3], "o", 0, 1, "again", time.Hour, nil)))
	e.retryDue(pids[3])
	require.True(t, e.lease(pids[3], "o", 1).Leased)

	var got []dialect.ProcessorAdminState
	e.unchanged("the failing list", func() { got = failing() })
	require.Len(t, got, 3)
	q := e.queueName(pids[0])
	require.Equal(t, dialect.PartitionInfo{ID: pids[1], Queue: q, Partition: 1}, got[0].PartitionInfo)
	require.Equal(t, 1, got[0].Attempts)
	require.Equal(t, "once", got[0].LastError)
	require.False(t, got[0].NextAttemptAt.IsZero())
	require.True(t, got[0].ParkedAt.IsZero())
	require.False(t, got[0].Leased)

	require.Equal(t, dialect.PartitionInfo{ID: pids[2], Queue: q, Partition: 2}, got[1].PartitionInfo)
	require.Equal(t, int64(1), got[1].ProcessedSeq)
	require.Equal(t, 3, got[1].Attempts)
	require.Equal(t, "thrice", got[1].LastError)
	require.False(t, got[1].ParkedAt.IsZero())

	require.Equal(t, pids[3], got[2].ID)
	require.True(t, got[2].Leased, "a delivery of its head may be in flight")
	require.Equal(t, 2, got[2].Attempts)
}

// testProcessorAdminRead: one processor row, read or locked for an
// operator's action.
func testProcessorAdminRead(t *testing.T, open Open) {
	e := newEnv(t, open)
	read := func(conn bun.IConn, pid int64, lock bool) dialect.ProcessorAdminReadResult {
		res, err := e.d.ProcessorAdminRead(e.ctx, &dialect.ProcessorAdminReadParams{Conn: conn, PartitionID: pid, Lock: lock})
		require.NoError(t, err)
		return res
	}
	pids := e.queue(2)
	e.sequenced(2, pids...)
	t.Run("Read", func(t *testing.T) {
		e := e.with(t)
		require.False(t, read(nil, 1<<40, false).Found)
		res := read(nil, pids[0], false)
		require.True(t, res.Found)
		require.Equal(t, dialect.ProcessorAdminState{}, res.State, "a healthy partition; PartitionInfo left empty")
		require.True(t, e.lease(pids[0], "o", 1).Leased)
		require.True(t, read(e.db, pids[0], false).State.Leased)
		require.NoError(t, e.d.ProcessorAck(e.ctx, &dialect.ProcessorUpdateParams{PartitionID: pids[0], Owner: "o", ProcessedSeq: 1, Attempts: 2, LastError: "x", RetryAfter: time.Hour}))
		st := read(nil, pids[0], false).State
		require.Equal(t, int64(1), st.ProcessedSeq)
		require.Equal(t, 2, st.Attempts)
		require.Equal(t, "x", st.LastError)
		require.False(t, st.NextAttemptAt.IsZero())
		require.False(t, st.Leased)
		require.NoError(t, e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			res := read(tx, pids[0], true)
			require.True(t, res.Found)
			require.Equal(t, st, res.State, "locked in a transaction")
			return nil
		}))
	})
	t.Run("LockWaits", func(t *testing.T) {
		// Another transaction holds the row: the locking read waits for it
		// and then sees the row as it left it.
		e := e.with(t)
		e.needRowLocks()
		pid := pids[1]
		var wg sync.WaitGroup
		defer wg.Wait() // after the release below, on a failure
		holder, release := e.holdRow(e.tb.Processor, "partition_id", pid)
		defer release(false)
		_, err := holder.NewRaw("UPDATE ? SET attempts = 7 WHERE partition_id = ?", bun.Ident(e.tb.Processor), pid).Exec(e.ctx)
		require.NoError(t, err)
		done := make(chan dialect.ProcessorAdminReadResult, 1)
		wg.Go(func() {
			var res dialect.ProcessorAdminReadResult
			err := e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
				var err error
				res, err = e.d.ProcessorAdminRead(ctx, &dialect.ProcessorAdminReadParams{Conn: tx, PartitionID: pid, Lock: true})
				return err
			})
			if err != nil {
				t.Errorf("locking read: %v", err)
			}
			done <- res
		})
		e.waitBlocked(e.tb.Processor)
		select {
		case <-done:
			t.Fatal("the locking read did not wait for the holder")
		default:
		}
		release(true)
		res := <-done
		require.True(t, res.Found)
		require.Equal(t, 7, res.State.Attempts, "the row as the holder left it")
	})
}
