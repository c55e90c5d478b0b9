package seqboxcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
	"github.com/seqbox/seqbox/outbox"
)

// TestMigrateAndStatus: migrate reports and applies the schema version;
// status sums each queue and lists partitions, once or watching.
func TestMigrateAndStatus(t *testing.T) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, prefix := cliDB(ctx, t, dsn)
			cli := func(want int, args ...string) string {
				t.Helper()
				code, out, errOut := run(t, append(args, "--dsn", dsn, "--prefix", prefix)...)
				require.Equal(t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
				return out
			}
			var st struct {
				Version, Latest, Applied int
				DryRun                   bool `json:"dry_run"`
			}
			require.NoError(t, json.Unmarshal([]byte(cli(seqboxcli.ExitOK, "migrate", "--status", "--json")), &st))
			require.Zero(t, st.Version)
			require.Positive(t, st.Latest)
			require.True(t, st.DryRun)
			require.Contains(t, cli(seqboxcli.ExitOK, "migrate", "--status"), "migration(s) to apply")
			require.Contains(t, cli(seqboxcli.ExitOK, "migrate"), "applied")
			require.NoError(t, json.Unmarshal([]byte(cli(seqboxcli.ExitOK, "migrate", "--json")), &st))
			require.Equal(t, st.Latest, st.Version)
			require.Zero(t, st.Applied, "a second run applies nothing")
			require.Contains(t, cli(seqboxcli.ExitOK, "migrate", "--status"), "up to date")

			ob, err := seqbox.New(db).TablePrefix(prefix).ProducerOnly().Queue("st", 3, nil).Start(ctx)
			require.NoError(t, err)
			defer func() { _ = ob.Stop(context.Background()) }()
			for range 5 {
				_, err := ob.Enqueue(ctx, db, "st", outbox.Message{Partition: 1, PayloadType: "t"})
				require.NoError(t, err)
			}
			var status struct {
				Queues []struct {
					Queue       string `json:"queue"`
					Partitions  int    `json:"partitions"`
					Incoming    int64  `json:"incoming"`
					OldestAgeMs int64  `json:"oldest_unprocessed_age_ms"`
				} `json:"queues"`
			}
			require.NoError(t, json.Unmarshal([]byte(cli(seqboxcli.ExitOK, "status", "--json")), &status))
			require.Len(t, status.Queues, 1)
			require.Equal(t, "st", status.Queues[0].Queue)
			require.Equal(t, 3, status.Queues[0].Partitions)
			require.Equal(t, int64(5), status.Queues[0].Incoming, "producer-only: nothing sequences them")
			out := cli(seqboxcli.ExitOK, "status", "--partitions")
			require.Equal(t, 4, strings.Count(out, "\n"), out)
			require.Contains(t, cli(seqboxcli.ExitOK, "status"), "UNPROCESSED")

			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			wout := &cancelAfterLines{lines: 2, marker: "QUEUE", cancel: wcancel}
			var werr bytes.Buffer
			code := seqboxcli.Main(wctx, []string{"status", "--watch", "200ms", "--dsn", dsn, "--prefix", prefix}, wout, &werr)
			require.Equal(t, seqboxcli.ExitOK, code, werr.String())
			require.GreaterOrEqual(t, strings.Count(wout.String(), "QUEUE"), 2, "watch prints again")
		})
	}
}

func TestAdminUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"migrate"}, seqboxcli.ExitUsage, "--dsn is required"},
		{[]string{"status"}, seqboxcli.ExitUsage, "--dsn is required"},
		{[]string{"status", "--dsn", "redis://x"}, seqboxcli.ExitUsage, "invalid DSN"},
		{[]string{"migrate", "--dsn", "sqlite:x.db", "extra"}, seqboxcli.ExitUsage, `unexpected argument "extra"`},
	} {
		code, out, errOut := run(t, tt.args...)
		require.Equal(t, tt.code, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
		require.Contains(t, errOut, tt.stderr)
	}
	for _, cmd := range []string{"migrate", "status"} {
		code, out, _ := run(t, "help", cmd)
		require.Equal(t, seqboxcli.ExitOK, code)
		require.Contains(t, out, "usage: seqbox "+cmd)
	}
}
