package seqboxcli_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// cliTargets are the three databases as the CLI names them.
func cliTargets(t *testing.T) map[string]string {
	return map[string]string{
		"postgres": dbtest.PostgresDSN(),
		"mysql":    dbtest.MySQLDSN(),
		"sqlite":   "sqlite:" + filepath.Join(t.TempDir(), "dlq.db"),
	}
}

// cliDB opens a target the way the CLI does, with a table prefix of its
// own whose tables are dropped when the test ends.
func cliDB(ctx context.Context, t *testing.T, dsn string) (*bun.DB, string) {
	db, err := seqboxcli.OpenDB(ctx, dsn)
	if err != nil {
		dbtest.Unreachable(t, dsn, "", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	prefix := dbtest.Prefix(t)
	t.Cleanup(func() {
		if d, err := dialects.Open(ctx, db, prefix); err == nil {
			_ = d.SchemaDrop(context.Background(), nil)
		}
	})
	return db, prefix
}

// TestDLQCommands runs every dlq action against each database: dead
// letters made by a handler bug are listed, shown, counted, previewed,
// replayed once the bug is fixed (and end resolved), and the typed
// refusals and the --yes rule hold.
func TestDLQCommands(t *testing.T) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testDLQCommands(t, dsn)
		})
	}
}

func testDLQCommands(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, prefix := cliDB(ctx, t, dsn)
	var fixed atomic.Bool
	ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).PollInterval(50*time.Millisecond).
		Queue("cli", 2, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			if strings.HasPrefix(string(d.Payload), "bad") && !fixed.Load() {
				return processor.Reject(errors.New("cannot handle " + string(d.Payload)))
			}
			return nil
		})).Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	enqueue := func(partition int, payloads ...string) []outbox.MessageID {
		var ids []outbox.MessageID
		for _, p := range payloads {
			id, err := ob.Enqueue(ctx, db, "cli", outbox.Message{Partition: partition, PayloadType: "t", Payload: []byte(p)})
			require.NoError(t, err)
			ids = append(ids, id)
		}
		require.NoError(t, ob.WaitProcessed(ctx, ids...))
		return ids
	}
	p0 := enqueue(0, "ok1", "bad1", "ok2")
	enqueue(1, "bad2")

	dlq := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := run(t, append(append([]string{"dlq"}, args...), "--dsn", dsn, "--prefix", prefix)...)
		require.Equal(t, want, code, "dlq %v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
		return out, errOut
	}
	counts := func() seqboxcli.DeadLetterCounts {
		out, _ := dlq(seqboxcli.ExitOK, "count", "--json")
		var c seqboxcli.DeadLetterCounts
		require.NoError(t, json.Unmarshal([]byte(out), &c))
		return c
	}
	require.Equal(t, seqboxcli.DeadLetterCounts{Pending: 2, Total: 2}, counts())
	out, _ := dlq(seqboxcli.ExitOK, "count")
	require.Contains(t, out, "pending")

	out, _ = dlq(seqboxcli.ExitOK, "list", "--queue", "cli")
	require.Contains(t, out, "cannot handle bad1")
	require.Contains(t, out, "LAST ERROR")
	out, _ = dlq(seqboxcli.ExitOK, "count", "--error", "handle bad2", "--json")
	require.Contains(t, out, `"pending": 1`, "by error text")
	out, _ = dlq(seqboxcli.ExitOK, "count", "--error", "HANDLE", "--json")
	require.Contains(t, out, `"total": 0`, "error text is case-sensitive")
	out, _ = dlq(seqboxcli.ExitOK, "count", "--header", "no=such", "--json")
	require.Contains(t, out, `"total": 0`, "by header: these letters have none")
	out, _ = dlq(seqboxcli.ExitOK, "list", "--queue", "cli", "--partition", "1", "--json", "--payloads")
	var page seqboxcli.DLQListJSON
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Letters, 1)
	require.Equal(t, "bad2", page.Letters[0].Payload)
	out, _ = dlq(seqboxcli.ExitOK, "list", "--limit", "1")
	require.Contains(t, out, "more: --after")

	out, _ = dlq(seqboxcli.ExitOK, "show", p0[1].String())
	require.Contains(t, out, "payload (4 bytes):\nbad1")
	require.Contains(t, out, "queue cli, partition 0, seq 2")
	_, errOut := dlq(seqboxcli.ExitFailure, "show", p0[0].String())
	require.Contains(t, errOut, "not found")

	// Without --yes nothing changes.
	out, _ = dlq(seqboxcli.ExitOK, "replay", "--queue", "cli")
	require.Contains(t, out, "would replay 2 dead letter(s) (nothing changed; add --yes")
	require.Equal(t, seqboxcli.DeadLetterCounts{Pending: 2, Total: 2}, counts())

	fixed.Store(true)
	out, _ = dlq(seqboxcli.ExitOK, "replay", "--queue", "cli", "--yes", "--json")
	var replayed struct {
		Changed   []int64  `json:"changed"`
		ReplayIDs []string `json:"replay_ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &replayed))
	require.Len(t, replayed.Changed, 2)
	require.Len(t, replayed.ReplayIDs, 2)
	require.Eventually(t, func() bool { return counts().Resolved == 2 }, time.Minute, 50*time.Millisecond,
		"a replay's ack resolves its letter (another process picks the replay up at its reconcile scan)")

	_, errOut = dlq(seqboxcli.ExitFailure, "resolve", "--id", strconv.FormatInt(replayed.Changed[0], 10), "--yes")
	require.Contains(t, errOut, "it is resolved")
	require.Contains(t, errOut, "another operator")
	out, _ = dlq(seqboxcli.ExitOK, "discard", "--queue", "cli", "--yes")
	require.Contains(t, out, "no pending dead letter matches: nothing to discard", "nothing to do is not a failure")

	fixed.Store(false)
	bad3 := enqueue(0, "bad3")
	out, _ = dlq(seqboxcli.ExitOK, "show", bad3[0].String(), "--json")
	var letter struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &letter))
	out, _ = dlq(seqboxcli.ExitOK, "discard", "--id", strconv.FormatInt(letter.ID, 10), "--note", "obsolete", "--yes")
	require.Contains(t, out, "discarded 1 dead letter(s)")

	out, _ = dlq(seqboxcli.ExitOK, "purge", "--older-than", "0s")
	require.Contains(t, out, "would delete")
	require.Equal(t, seqboxcli.DeadLetterCounts{Resolved: 2, Discarded: 1, Total: 3}, counts())
	out, _ = dlq(seqboxcli.ExitOK, "purge", "--older-than", "0s", "--yes")
	require.Contains(t, out, "purged 3 dead letter(s)")
	require.Zero(t, counts())
}

func TestDLQUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"dlq"}, seqboxcli.ExitUsage, "Actions:"},
		{[]string{"dlq", "frob"}, seqboxcli.ExitUsage, `unknown action "frob"`},
		{[]string{"dlq", "list"}, seqboxcli.ExitUsage, "--dsn is required"},
		{[]string{"dlq", "replay", "--dsn", "sqlite:x.db", "--id", "1", "--queue", "q"}, seqboxcli.ExitUsage, "not both"},
		{[]string{"dlq", "replay", "--dsn", "sqlite:x.db", "--status", "resolved"}, seqboxcli.ExitUsage, "only pending"},
		{[]string{"dlq", "list", "--dsn", "sqlite:x.db", "--partition", "1"}, seqboxcli.ExitUsage, "needs --queue"},
		{[]string{"dlq", "list", "--dsn", "sqlite:x.db", "--failed-from", "yesterday"}, seqboxcli.ExitUsage, "--failed-from"},
		{[]string{"dlq", "show", "--dsn", "sqlite:x.db", "nope"}, seqboxcli.ExitUsage, "invalid message id"},
		{[]string{"dlq", "count", "--dsn", "sqlite:x.db", "--header", "novalue"}, seqboxcli.ExitUsage, "want name=value"},
		{[]string{"dlq", "count", "--dsn", "sqlite:x.db", "--error", "a\x00b"}, seqboxcli.ExitUsage, "without NUL"},
		{[]string{"dlq", "show", "--dsn", "sqlite:x.db"}, seqboxcli.ExitUsage, "want 1 argument"},
		{[]string{"dlq", "list", "--dsn", "redis://x"}, seqboxcli.ExitUsage, "invalid DSN"},
	} {
		code, out, errOut := run(t, tt.args...)
		require.Equal(t, tt.code, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
		require.Contains(t, errOut, tt.stderr, "%v", tt.args)
	}
	code, out, _ := run(t, "help", "dlq")
	require.Equal(t, seqboxcli.ExitOK, code)
	for _, action := range []string{"list", "count", "show", "replay", "resolve", "discard", "purge", "--older-than", "--yes"} {
		require.Contains(t, out, action)
	}
}
