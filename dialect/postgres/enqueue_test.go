package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/rotatetest"
)

// TestEnqueueOnAnyConnection: the enqueue's prepared statements write a
// chunk, small (one statement) or large (two), in the caller's transaction
// whatever it is: a transaction of the dialect's sql.DB runs them
// prepared; one of another pool (the application's own), a single
// connection, or a transaction after Release runs them inlined. The rows
// are invisible until the caller commits, and a rollback leaves none.
func TestEnqueueOnAnyConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, _ := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	require.NoError(t, d.Prepare(ctx))
	pid := rotatetest.OneQueue(t, d)
	other := dbtest.Postgres(t)
	otherBun := bun.NewDB(db.DB, db.Dialect()) // another *bun.DB over the dialect's sql.DB
	incoming := d.Tables().Incoming

	next := byte(0)
	messages := func(n int) []dialect.MessageRow {
		rows := make([]dialect.MessageRow, n)
		for i := range rows {
			next++
			rows[i] = dialect.MessageRow{ID: dialect.MessageID{0x01, next}, PartitionID: pid, PayloadType: `type "quoted" \ {x}`,
				Payload: []byte{0, byte(i)}, Key: "k,1", Headers: []byte(`{"a":"b\"c"}`)}
			if i%2 == 1 {
				rows[i].Key, rows[i].Headers = "", nil
			}
		}
		return rows
	}
	want := 0
	// prepared counts the enqueue statements prepared on tx's connection.
	prepared := func(tx bun.Tx) int {
		var n int
		require.NoError(t, tx.NewRaw("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE ? AND statement LIKE '%unnest%'",
			"%"+d.Tables().Incoming+"%").Scan(ctx, &n))
		return n
	}
	for _, c := range []struct {
		name     string
		begin    func() (bun.Tx, error)
		prepared bool
	}{
		{"the dialect's pool", func() (bun.Tx, error) { return db.BeginTx(ctx, nil) }, true},
		{"another bun.DB, the same pool", func() (bun.Tx, error) { return otherBun.BeginTx(ctx, nil) }, true},
		{"another pool", func() (bun.Tx, error) { return other.BeginTx(ctx, nil) }, false},
	} {
		for _, n := range []int{2, 60} {
			rows := messages(n)
			tx, err := c.begin()
			require.NoError(t, err)
			require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows, ChunkRows: 100, ChunkBytes: 1 << 20}), c.name)
			require.Equal(t, want, rotatetest.Count(t, db, incoming), "%s: uncommitted rows are not seen", c.name)
			require.Equal(t, c.prepared, prepared(tx) > 0, "%s: prepared on the transaction's connection", c.name)
			require.NoError(t, tx.Rollback())
			require.Equal(t, want, rotatetest.Count(t, db, incoming), "%s: a rollback leaves nothing", c.name)

			tx, err = c.begin()
			require.NoError(t, err)
			require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows, ChunkRows: 100, ChunkBytes: 1 << 20}), c.name)
			require.NoError(t, tx.Commit())
			want += n
			require.Equal(t, want, rotatetest.Count(t, db, incoming), c.name)
		}
	}
	for _, c := range []struct {
		name string
		pool *bun.DB
	}{{"a connection of another pool", other}, {"a connection of the dialect's pool", db}} {
		conn, err := c.pool.Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: conn, Rows: messages(3), ChunkRows: 100, ChunkBytes: 1 << 20}), c.name)
		require.NoError(t, conn.Close())
		want += 3
		require.Equal(t, want, rotatetest.Count(t, db, incoming), c.name)
	}
	// After Release (an outbox closed) nothing is prepared: a transaction
	// of the dialect's pool runs the statements inlined.
	require.NoError(t, d.Release())
	db.SetMaxOpenConns(1) // a new connection, where Release left nothing prepared
	db.SetMaxIdleConns(0)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: messages(60), ChunkRows: 100, ChunkBytes: 1 << 20}), "after Release")
	require.Zero(t, prepared(tx), "after Release: inlined")
	require.NoError(t, tx.Commit())
	want += 60
	require.Equal(t, want, rotatetest.Count(t, db, incoming), "after Release")

	// Every body as written: keys, headers and payload types with quotes,
	// backslashes, braces and commas, NULL where there was none.
	var bodies []struct {
		Key         []byte  `bun:"msg_key"`
		PayloadType string  `bun:"payload_type"`
		Headers     *string `bun:"headers"`
	}
	require.NoError(t, db.NewRaw("SELECT msg_key, payload_type, headers FROM ? ORDER BY id", bun.Ident(d.Tables().Body)).Scan(ctx, &bodies))
	require.Len(t, bodies, want)
	for _, b := range bodies {
		require.Equal(t, `type "quoted" \ {x}`, b.PayloadType)
		if b.Key == nil {
			require.Nil(t, b.Headers)
		} else {
			require.Equal(t, "k,1", string(b.Key))
			require.Equal(t, `{"a":"b\"c"}`, *b.Headers)
		}
	}
}

// TestPendingListBodiesOfEarlierReleases: a body written before migration
// 012 has no partition, and outgoing no index by body id any more; such a
// message is still told pending (incoming, or sequenced above its cursor)
// from acked, as for any other.
func TestPendingListBodiesOfEarlierReleases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, d, prefix := newRotating(t)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	pid := rotatetest.OneQueue(t, d)
	moved := []dialect.MessageID{{1}, {2}, {3}}
	rotatetest.EnqueueAndMove(t, db, d, pid, moved...)
	incoming := dialect.MessageID{4}
	require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: db, ChunkRows: 10, ChunkBytes: 1 << 20,
		Rows: []dialect.MessageRow{{ID: incoming, PartitionID: pid, PayloadType: "t", Payload: []byte("x")}}}))
	_, err := db.NewRaw("UPDATE ? SET processed_seq = 1", bun.Ident(prefix+"processor")).Exec(ctx)
	require.NoError(t, err)
	all := append(append([]dialect.MessageID{}, moved...), incoming, dialect.MessageID{5})
	want := []dialect.MessageID{moved[1], moved[2], incoming}
	pending := func() []dialect.MessageID {
		out, err := d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: all})
		require.NoError(t, err)
		return out
	}
	require.ElementsMatch(t, want, pending(), "bodies with their partition")
	_, err = db.NewRaw("UPDATE ? SET partition_id = NULL", bun.Ident(prefix+"body")).Exec(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, want, pending(), "bodies of an earlier release")
}
