package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBeginWrite: every outbox transaction starts with a no-op write on
// this prefix's own version table, so it takes the write lock first.
func TestBeginWrite(t *testing.T) {
	t.Parallel()
	d, err := New(nil, "app_") // New does not touch the database
	require.NoError(t, err)
	var text string
	for _, c := range d.(*sqliteDialect).Statements() {
		if c.Stmt == beginWrite {
			text = c.Text
		}
	}
	require.Equal(t, "UPDATE app_schema_version SET version = version WHERE 0", text)
}

func TestDSN(t *testing.T) {
	t.Parallel()
	// The two drivers ignore each other's keys, so each must get its own.
	mattn := DSN("sqlite3", "/tmp/x.db")
	require.Contains(t, mattn, "_busy_timeout=10000")
	require.Contains(t, mattn, "_journal_mode=WAL")
	require.Contains(t, mattn, "_txlock=immediate")
	modernc := DSN("sqlite", "/tmp/x.db")
	require.Contains(t, modernc, "_pragma=busy_timeout(10000)")
	require.Contains(t, modernc, "_pragma=journal_mode(WAL)")
	require.Contains(t, modernc, "_txlock=immediate")
}
