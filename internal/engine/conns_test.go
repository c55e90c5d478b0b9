package engine

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// TestConnWatchWarnsOnceOnChurn: a pool that closes more connections for
// want of an idle slot than one interval allows is warned about, once.
func TestConnWatchWarnsOnceOnChurn(t *testing.T) {
	db, err := sql.Open(sqliteshim.ShimName, "file:"+filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	defer db.Close()
	var logs bytes.Buffer
	w := newConnWatch(db, slog.New(slog.NewTextHandler(&logs, nil)))

	ping := func(n int) {
		for range n {
			require.NoError(t, db.PingContext(context.Background()))
		}
	}
	ping(connWatchLimit + 5) // the default keeps idle connections: nothing closed
	w.check()
	require.Empty(t, logs.String())

	db.SetMaxIdleConns(0) // every connection closed when given back (and the idle one now)
	w.check()
	require.Empty(t, logs.String())
	ping(connWatchLimit)
	w.check()
	require.Empty(t, logs.String(), "at the limit: no warning")

	ping(connWatchLimit + 1)
	w.check()
	require.Contains(t, logs.String(), "SetMaxIdleConns")
	require.Contains(t, logs.String(), "closed_for_idle_limit=21")

	logs.Reset()
	ping(connWatchLimit * 2)
	w.check()
	require.Empty(t, logs.String(), "warned once")
}
