// Package rotatetest holds what the rotated tables' tests of every dialect
// share (docs/ROTATION.md): a queue of one partition, messages written and
// moved, a table's rows, the generations' states. It imports no dialect,
// so that each dialect's own tests can use it.
package rotatetest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// OneQueue registers queue "q" of one partition and returns its id.
func OneQueue(t *testing.T, d dialect.Dialect) int64 {
	t.Helper()
	ids, err := d.QueueRegister(t.Context(), &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 1}}})
	require.NoError(t, err)
	return ids[0][0]
}

// EnqueueAndMove writes a message per id to partition pid and moves them.
func EnqueueAndMove(t *testing.T, db *bun.DB, d dialect.Dialect, pid int64, ids ...dialect.MessageID) {
	t.Helper()
	ctx := t.Context()
	rows := make([]dialect.MessageRow, len(ids))
	for i, id := range ids {
		rows[i] = dialect.MessageRow{ID: id, PartitionID: pid, PayloadType: "t", Payload: []byte("p")}
	}
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, Rows: rows, ChunkRows: 100, ChunkBytes: 1 << 20}))
	_, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
	require.NoError(t, err)
}

// Count is the number of rows of table, read on db (a transaction too).
func Count(t *testing.T, db bun.IDB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(table)).Scan(t.Context(), &n))
	return n
}

// GenStates is every generation's state, by gen.
func GenStates(t *testing.T, db *bun.DB, prefix string) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.NewRaw("SELECT state FROM ? ORDER BY gen", bun.Ident(prefix+"generations")).Scan(t.Context(), &out))
	return out
}
