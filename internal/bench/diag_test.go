//go:build benchdiag

package bench

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/uuidv7"
)

// TestDiagEnqueueSQLOnly: seqbox's enqueue SQL (body + incoming) without an
// outbox running, i.e. without the in-process sequencer moving the rows.
func TestDiagEnqueueSQLOnly(t *testing.T) {
	ctx := context.Background()
	var db *bun.DB
	var err error
	switch os.Getenv("SEQBOX_BENCH_DB") {
	case "postgres":
		db, err = openPostgres(ctx, dbtest.PostgresDSN())
	case "mysql":
		db, err = openMySQL(ctx, dbtest.MySQLDSN())
	default:
		db, err = openSQLite(ctx, "sqlite:"+t.TempDir()+"/d.db")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, producers := range []int{1, 4} {
		for run := range 3 {
			prefix := newPrefix()
			d, err := seqbox.Dialect(ctx, db, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.SchemaMigrate(ctx); err != nil {
				t.Fatal(err)
			}
			ids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queue: "bench", Partitions: 16})
			if err != nil {
				t.Fatal(err)
			}
			payload := make([]byte, 256)
			var count atomic.Int64
			m := &meter{}
			m.begin()
			el, err := produce(ctx, producers, 5*time.Second, 0, &count, func(ctx context.Context, p int) (int, error) {
				rows := make([]dialect.MessageRow, 100)
				mids := make([][16]byte, 100)
				_ = uuidv7.Fill(mids, time.Now())
				for i := range rows {
					rows[i] = dialect.MessageRow{ID: mids[i], PartitionID: ids[i%16], PayloadType: payloadType, Payload: payload}
				}
				unlock := d.LockWriter()
				defer unlock()
				return 100, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					return d.MessageInsertMany(ctx, tx, &dialect.MessageInsertManyParams{Rows: rows})
				})
			})
			m.end()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s producers=%d run=%d: enqueue SQL only, no sequencer: %.0f msgs/s (cpu client %.0f%%, machine %.0f%%)",
				os.Getenv("SEQBOX_BENCH_DB"), producers, run, float64(count.Load())/el.Seconds(), m.cpu.ClientPct, m.cpu.MachinePct)
			_ = d.SchemaDrop(ctx)
		}
	}
}
