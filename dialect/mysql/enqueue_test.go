package mysql

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// TestEnqueueExactCounts: a chunk of a prepared count (1, 10, 100, 1,000
// rows) runs as prepared statements in a transaction of the dialect's
// pool, any other count inlined, and every row reads back as written,
// incoming in the caller's order: a 1,000-row chunk carrying a 1 MiB
// payload too, which the driver sends apart as long data.
func TestEnqueueExactCounts(t *testing.T) {
	t.Parallel()
	db, d, _ := newRotating(t)
	ctx := t.Context()
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	require.NoError(t, d.Prepare(ctx))
	pids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "q", Partitions: 1}}})
	require.NoError(t, err)
	pid := pids[0][0]
	tables := d.Tables()
	executed := func(tx bun.Tx) int {
		var n int
		require.NoError(t, tx.NewRaw("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_STMT_EXECUTE'").Scan(ctx, &n))
		return n
	}
	for _, c := range []struct {
		n        int
		big      bool
		prepared bool
	}{{1, false, true}, {10, false, true}, {7, false, false}, {100, false, true}, {1000, true, true}, {101, false, false}} {
		name := fmt.Sprintf("%d rows", c.n)
		raw := make([][16]byte, c.n)
		require.NoError(t, uuidv7.Fill(raw, time.Now()))
		rows := make([]dialect.MessageRow, c.n)
		for i := range rows {
			payload := []byte{0, '\'', '\\', '"', 0xff, byte(i), byte(i >> 8)}
			if c.big && i == c.n/2 {
				payload = bytes.Repeat([]byte{0, 0x27, 0x5c, 0xff}, 1<<18) // 1 MiB
			}
			rows[i] = dialect.MessageRow{ID: dialect.MessageID(raw[i]), PartitionID: pid, PayloadType: `t'"\`, Payload: payload,
				Key: fmt.Sprintf(`k'\%d`, i), Headers: []byte(`{"a":"'\"é"}`)}
			if i%2 == 1 {
				rows[i].Key, rows[i].Headers = "", nil
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		before := executed(tx)
		require.NoError(t, d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows, ChunkRows: 1000, ChunkBytes: 8 << 20}), name)
		if c.prepared {
			require.Equal(t, before+2, executed(tx), "%s: the bodies and the incoming rows, each one prepared statement", name)
		} else {
			require.Equal(t, before, executed(tx), "%s: inlined", name)
		}
		require.NoError(t, tx.Commit())

		var order [][]byte
		require.NoError(t, db.NewRaw("SELECT i.body_id FROM ? i WHERE i.partition_id = ? ORDER BY i.id DESC LIMIT ?",
			bun.Ident(tables.Incoming), pid, c.n).Scan(ctx, &order))
		require.Len(t, order, c.n, name)
		for i := range rows {
			require.Equal(t, rows[i].ID[:], order[c.n-1-i], "%s: incoming row %d in the caller's order", name, i)
		}
		for i, r := range rows {
			var got struct {
				Key         []byte  `bun:"msg_key"`
				PayloadType string  `bun:"payload_type"`
				Payload     []byte  `bun:"payload"`
				Headers     *string `bun:"headers"`
			}
			require.NoError(t, db.NewRaw("SELECT msg_key, payload_type, payload, headers FROM ? WHERE id = ?", bun.Ident(tables.Body), r.ID[:]).Scan(ctx, &got))
			require.Equal(t, r.PayloadType, got.PayloadType, "%s: row %d", name, i)
			require.True(t, bytes.Equal(r.Payload, got.Payload), "%s: row %d: payload", name, i)
			if r.Key == "" {
				require.Nil(t, got.Key, "%s: row %d: no key", name, i)
			} else {
				require.Equal(t, r.Key, string(got.Key), "%s: row %d", name, i)
			}
			if r.Headers == nil {
				require.Nil(t, got.Headers, "%s: row %d: no headers", name, i)
			} else {
				require.NotNil(t, got.Headers, "%s: row %d", name, i)
				require.Equal(t, string(r.Headers), *got.Headers, "%s: row %d", name, i)
			}
		}
	}
}
