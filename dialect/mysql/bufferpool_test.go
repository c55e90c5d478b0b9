package mysql_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
)

// TestStartWarnsOfASmallBufferPool: on the real server, Start warns when
// the database's partitions need more buffer pool than the server has
// (32 MiB + 64 KiB each; docs/ARCHITECTURE.md, "Cost that stays flat"),
// and says nothing of it for a queue that fits. The partitions it
// registers are as many as this server's pool makes too many.
func TestStartWarnsOfASmallBufferPool(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	defer cancel()
	db := dbtest.MySQL(t)
	var size int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size").Scan(&size))
	const base, per = 32 << 20, 64 << 10
	start := func(partitions int) string {
		var logs dbtest.SyncBuffer
		b := seqbox.New(db).TablePrefix(dbtest.Prefix(t)).Migrate(true).ProducerOnly().
			Logger(slog.New(slog.NewTextHandler(&logs, nil)))
		for q := 0; partitions > 0; q++ {
			n := min(partitions, outbox.MaxPartitions)
			b = b.Queue(fmt.Sprintf("q%d", q), n, nil)
			partitions -= n
		}
		ob, err := b.Start(ctx)
		require.NoError(t, err)
		require.NoError(t, ob.Stop(ctx))
		return logs.String()
	}

	if size >= base+per {
		require.NotContains(t, start(1), "innodb_buffer_pool_size", "one partition fits any pool above 32 MiB")
	}
	tooMany := int((size-base)/per) + 1
	if tooMany > 4*outbox.MaxPartitions {
		t.Skipf("this server's buffer pool (%d MiB) holds more than %d partitions: no warning to provoke", size>>20, 4*outbox.MaxPartitions)
	}
	logs := start(tooMany)
	require.Contains(t, logs, "level=WARN")
	require.Contains(t, logs, fmt.Sprintf("partitions=%d innodb_buffer_pool_size_mib=%d", tooMany, size>>20))
}
