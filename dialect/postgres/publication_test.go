package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/rotatetest"
)

// TestMovesUnderAPublication: incoming has no primary key (migration 013),
// and a publication that publishes deletes fails every DELETE of a table
// without a replica identity. With REPLICA IDENTITY FULL the move and the
// purge delete as they do without one. The publication names only this
// test's table, so that no other test's tables are published.
func TestMovesUnderAPublication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pub := bun.Ident(prefix + "pub")
	_, err := db.NewRaw("CREATE PUBLICATION ? FOR TABLE ? WITH (publish = 'insert, update, delete')", pub, bun.Ident(prefix+"incoming")).Exec(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.NewRaw("DROP PUBLICATION IF EXISTS ?", pub).Exec(context.Background()) })

	pid := rotatetest.OneQueue(t, d)
	rotatetest.EnqueueAndMove(t, db, d, pid, dialect.MessageID{1}, dialect.MessageID{2})
	require.Zero(t, rotatetest.Count(t, db, prefix+"incoming"), "moved")
	require.Equal(t, 2, rotatetest.Count(t, db, prefix+"outgoing"))

	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, ChunkRows: 10, ChunkBytes: 1 << 20,
		Rows: []dialect.MessageRow{{ID: dialect.MessageID{3}, PartitionID: pid, PayloadType: "t", Payload: []byte("x"), Headers: []byte(`{"k":"v"}`)}}}))
	res, err := d.PurgePartition(ctx, &dialect.PurgeParams{PartitionID: pid, Headers: []dialect.Header{{Key: "k", Value: "v"}}, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, res.Incoming)
	require.Zero(t, rotatetest.Count(t, db, prefix+"incoming"), "purged")
}
