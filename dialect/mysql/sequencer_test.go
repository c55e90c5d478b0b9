package mysql

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestSelectHeadsReadsHeadsOnly: the several-partition move's head read
// walks each partition's index up to its limit and no further, whatever
// the backlog behind it ("Cost that stays flat"); an equality join on
// partition_id would walk the whole partition.
func TestSelectHeadsReadsHeadsOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure bound
	defer cancel()
	db := dbtest.MySQL(t)
	prefix := dbtest.Prefix(t)
	dl, err := New(ctx, db, prefix)
	require.NoError(t, err)
	d := dl.(*mysqlDialect)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	t.Cleanup(func() { _ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{}) })
	tables, err := dialect.NewTables(prefix)
	require.NoError(t, err)

	// Partition 1 has a backlog of 5,000 rows, partition 2 three, 3 none;
	// their ids interleave.
	_, err = db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id)
WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99)
SELECT IF((a.i * 100 + b.i) % 2000 = 1, 2, 1), UNHEX(MD5(a.i * 100 + b.i)) FROM n a, n b
WHERE a.i * 100 + b.i < 5003 ORDER BY a.i, b.i`, bun.Ident(tables.Incoming))
	require.NoError(t, err)
	var ids []struct {
		PartitionID int64 `bun:"partition_id"`
		ID          int64 `bun:"id"`
	}
	require.NoError(t, db.NewRaw(`SELECT partition_id, id FROM ? WHERE `+dbtest.IncomingRows+` ORDER BY id`, bun.Ident(tables.Incoming)).Scan(ctx, &ids))
	want := map[int64][]int64{}
	for _, r := range ids {
		if r.PartitionID != 1 || len(want[1]) < 10 {
			want[r.PartitionID] = append(want[r.PartitionID], r.ID)
		}
	}
	require.Len(t, want[2], 3)

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	reads := func() int64 {
		var rows []struct {
			Name  string `bun:"Variable_name"`
			Value int64  `bun:"Value"`
		}
		require.NoError(t, conn.NewRaw(`SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next', 'Handler_read_first', 'Handler_read_rnd_next', 'Handler_icp_attempts')`).Scan(ctx, &rows))
		var n int64
		for _, r := range rows {
			n += r.Value
		}
		return n
	}
	before := reads()
	var got []struct {
		PartitionID int64  `bun:"partition_id"`
		ID          int64  `bun:"id"`
		BodyID      []byte `bun:"body_id"`
		BodyGen     int16  `bun:"body_gen"`
	}
	args := kit.Args{"limit": 10}
	for i := range headArms {
		args["p"+strconv.Itoa(i)], args["a"+strconv.Itoa(i)] = int64(max(3-i, 0)), int64(0)
	}
	require.NoError(t, d.Query(ctx, conn, moveSQL.SelectHeads, args, &got))
	read := reads() - before
	byPartition := map[int64][]int64{}
	for _, r := range got {
		byPartition[r.PartitionID] = append(byPartition[r.PartitionID], r.ID)
	}
	for _, ids := range byPartition {
		slices.Sort(ids) // in any order: MoveMany sorts them
	}
	require.Equal(t, want, byPartition)
	t.Logf("handler reads: %d", read)
	require.Less(t, read, int64(200), "a read of 13 rows walked the backlog")
}
