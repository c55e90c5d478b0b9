package mysql

import (
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestRegisterWritesTheStops: every registered partition has its two
// stops, which no count of the library sees.
func TestRegisterWritesTheStops(t *testing.T) {
	f := newFloorsFixture(t, dbtest.MySQL(t))
	var stops []struct {
		ID          int64 `bun:"id"`
		PartitionID int64 `bun:"partition_id"`
	}
	require.NoError(t, f.db.NewRaw(`SELECT id, partition_id FROM ? WHERE id <= 0 ORDER BY id DESC`, bun.Ident(f.d.Tables().Incoming)).Scan(f.ctx, &stops))
	require.Len(t, stops, 4)
	for i, pid := range f.pids {
		require.Equal(t, -2*pid, stops[2*i].ID)
		require.Equal(t, -2*pid-1, stops[2*i+1].ID)
		require.Equal(t, pid, stops[2*i].PartitionID)
		require.Equal(t, pid, stops[2*i+1].PartitionID)
	}
	ps, err := f.d.PartitionStats(f.ctx, &dialect.PartitionStatsParams{})
	require.NoError(t, err)
	for _, p := range ps {
		require.Zero(t, p.Incoming, "a stop is not a message")
		require.True(t, p.OldestIncoming.IsZero())
	}
	pids, err := f.d.IncomingPartitionList(f.ctx, &dialect.IncomingPartitionListParams{})
	require.NoError(t, err)
	require.Empty(t, pids, "nor is it work for the reconciler")
}

// TestStopsEndAHeadRead: under a held read view, a head-read arm that has
// read its partition's rows stops at the next partition's stops; without
// them it walks every entry the next partition's moves left delete-marked
// (docs/ARCHITECTURE.md, "Cost that stays flat", stops). Counted in pages
// the read touched (ANALYZE), not in time.
//
// The reads are READ UNCOMMITTED. A consistent read walks the entries
// only while it sees every change on their pages as committed before it
// (the page's max trx id below its view's oldest open writer); then
// InnoDB skips a delete-marked entry without checking the range's end,
// as READ UNCOMMITTED always does. Any other test's writing transaction
// open since before these writes made InnoDB check each entry instead,
// and neither read walked: the control failed under load.
func TestStopsEndAHeadRead(t *testing.T) {
	f := newFloorsFixture(t, dbtest.MySQL(t))
	incoming := bun.Ident(f.d.Tables().Incoming)
	// Two partitions with stops, f.pids; two without, past every real one.
	bare := []int64{f.pids[1] + 1000, f.pids[1] + 1001}

	f.holdReadView()

	for _, pair := range [][2]int64{{f.pids[0], f.pids[1]}, {bare[0], bare[1]}} {
		head, next := pair[0], pair[1]
		// next: 20,000 rows moved (deleted) while the read view is held.
		_, err := f.db.NewRaw(`INSERT INTO ? (partition_id, body_id, body_gen)
WITH RECURSIVE s (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 199)
SELECT ?, UNHEX(MD5(a.n * 200 + b.n)), 0 FROM s a, s b WHERE a.n < 100 ORDER BY a.n, b.n`, incoming, next).Exec(f.ctx)
		require.NoError(t, err)
		_, err = f.db.NewRaw(`DELETE FROM ? WHERE partition_id = ? AND id > 0`, incoming, next).Exec(f.ctx)
		require.NoError(t, err)
		// head: ten rows waiting, more than the five InnoDB reads before
		// it starts reading ahead.
		_, err = f.db.NewRaw(`INSERT INTO ? (partition_id, body_id, body_gen)
WITH RECURSIVE s (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 10)
SELECT ?, UNHEX(MD5(n)), 0 FROM s ORDER BY n`, incoming, head).Exec(f.ctx)
		require.NoError(t, err)
	}

	// One arm of the head read (sequencer.go, SelectHeads).
	pages := func(pid int64) int {
		var plan string
		tx, err := f.db.BeginTx(f.ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		require.NoError(t, tx.NewRaw(`ANALYZE FORMAT=JSON SELECT i.partition_id, i.id, i.body_id, i.body_gen FROM ? i FORCE INDEX (?)
WHERE i.partition_id = ? AND i.id > 0 ORDER BY i.id LIMIT 100`, incoming, bun.Ident(f.d.Tables().Incoming+"_partition_id"), pid).Scan(f.ctx, &plan))
		var doc struct {
			QueryBlock struct {
				NestedLoop []struct {
					Table struct {
						Rows        int `json:"r_rows"`
						EngineStats struct {
							Pages int `json:"pages_accessed"`
						} `json:"r_engine_stats"`
					} `json:"table"`
				} `json:"nested_loop"`
			} `json:"query_block"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &doc), plan)
		require.Len(t, doc.QueryBlock.NestedLoop, 1, plan)
		table := doc.QueryBlock.NestedLoop[0].Table
		require.Equal(t, 10, table.Rows, plan)
		return table.EngineStats.Pages
	}
	stopped, walked := pages(f.pids[0]), pages(bare[0])
	t.Logf("pages a read of ten rows touched: %d before stops, %d before 20,000 delete-marked entries", stopped, walked)
	require.GreaterOrEqual(t, walked-stopped, 15, "without stops the read walks the next partition's entries")
}
