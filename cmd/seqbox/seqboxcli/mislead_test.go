package seqboxcli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
	"github.com/seqbox/seqbox/processor"
)

// The CLI never misleads: a typo is an error, a preview says what its
// --yes will do, nothing to do is a success, exit codes mean one thing.

// onEachDB runs fn on each database, in parallel.
func onEachDB(t *testing.T, fn func(t *testing.T, ctx context.Context, dsn string)) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			fn(t, ctx, dsn)
		})
	}
}

// deadLetters makes a pending dead letter of each payload (in partition
// 0) and returns their ids (dlq show --json), by payload.
func (s *scenario) deadLetters(payloads ...string) map[string]int64 {
	s.t.Helper()
	mids := s.enqueue(0, payloads...)
	require.NoError(s.t, s.ob.WaitProcessed(s.ctx, mids...))
	ids := map[string]int64{}
	for i, mid := range mids {
		var l struct {
			ID int64 `json:"id"`
		}
		require.NoError(s.t, json.Unmarshal([]byte(s.cli(seqboxcli.ExitOK, "dlq", "show", mid.String(), "--json")), &l))
		ids[payloads[i]] = l.ID
	}
	return ids
}

// cliErr runs a command that must exit with want and returns its stderr.
func (s *scenario) cliErr(want int, args ...string) string {
	s.t.Helper()
	code, out, errOut := run(s.t, append(args, "--dsn", s.dsn, "--prefix", s.prefix)...)
	require.Equal(s.t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
	return errOut
}

// expect runs a command and reports (without stopping the test, so that
// every case is reported) an exit code other than want or a stderr
// without each of the texts.
func (s *scenario) expect(want int, args []string, stderr ...string) {
	s.t.Helper()
	code, out, errOut := run(s.t, append(args, "--dsn", s.dsn, "--prefix", s.prefix)...)
	if assert.Equal(s.t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut) {
		for _, want := range stderr {
			assert.Contains(s.t, errOut, want, "%v", args)
		}
	}
}

// TestUnknownQueueIsAnError: a --queue the database does not have is a
// failure (exit 1) naming the queues there are and the nearest, for every
// command that takes --queue, previews included. Before, dlq list printed
// an empty table, partitions list "no parked partitions" and dlq replay's
// preview an empty table, each exiting 0.
func TestUnknownQueueIsAnError(t *testing.T) {
	onEachDB(t, func(t *testing.T, ctx context.Context, dsn string) {
		s := newScenario(ctx, t, dsn)
		for _, args := range [][]string{
			{"dlq", "list"}, {"dlq", "count"}, {"dlq", "replay"}, {"dlq", "replay", "--yes"}, {"dlq", "resolve"},
			{"dlq", "discard", "--yes"}, {"dlq", "purge"}, {"dlq", "purge", "--yes"},
			{"partitions", "list"}, {"partitions", "resume", "--partition", "0"}, {"partitions", "retry", "--all", "--yes"},
			{"partitions", "skip", "--partition", "0", "--yes"},
			{"purge", "--header", "a=b"}, {"purge", "--header", "a=b", "--yes"},
			{"status"}, {"status", "--partitions", "--json"},
		} {
			s.expect(seqboxcli.ExitFailure, append(args, "--queue", "qq"), `unknown queue "qq"`, `did you mean "q"?`, "the queues are: q")
		}
		// The right name still works.
		require.Contains(t, s.cli(seqboxcli.ExitOK, "status", "--queue", "q"), "QUEUE")
	})
}

// TestPreviewsRunTheChecksOfYes: a preview says exactly what its --yes
// will do. Before, dlq purge's preview ignored --older-than, a purge of
// pending letters previewed them, and resolve previewed a discarded
// letter, each exiting 0 where --yes fails or does something else.
func TestPreviewsRunTheChecksOfYes(t *testing.T) {
	onEachDB(t, func(t *testing.T, ctx context.Context, dsn string) {
		s := newScenario(ctx, t, dsn)
		ids := s.deadLetters("bad1", "bad2", "bad3")
		s.cli(seqboxcli.ExitOK, "dlq", "resolve", "--id", strconv.FormatInt(ids["bad1"], 10), "--yes")
		s.cli(seqboxcli.ExitOK, "dlq", "discard", "--id", strconv.FormatInt(ids["bad2"], 10), "--yes")

		// Each check below is independent of the others: a failure is
		// reported and the next one runs.
		// --older-than: the letters were finished a moment ago.
		code, out, _ := run(t, "dlq", "purge", "--older-than", "1h", "--dsn", dsn, "--prefix", s.prefix)
		assert.Equal(t, seqboxcli.ExitOK, code)
		assert.Contains(t, out, "nothing to purge", "the preview applies the cutoff")
		assert.NotContains(t, out, "bad", "the preview lists no letter the cutoff keeps")
		var preview struct {
			DryRun  bool              `json:"dry_run"`
			Count   int               `json:"count"`
			Letters []json.RawMessage `json:"letters"`
		}
		_, out, _ = run(t, "dlq", "purge", "--older-than", "1h", "--json", "--dsn", dsn, "--prefix", s.prefix)
		if assert.NoError(t, json.Unmarshal([]byte(out), &preview)) {
			assert.True(t, preview.DryRun)
			assert.Zero(t, preview.Count)
			assert.Empty(t, preview.Letters)
		}
		preview.Letters = nil
		_, out, _ = run(t, "dlq", "purge", "--older-than", "0s", "--json", "--dsn", dsn, "--prefix", s.prefix)
		if assert.NoError(t, json.Unmarshal([]byte(out), &preview)) {
			assert.Equal(t, 2, preview.Count, "the resolved and the discarded letter")
			assert.Len(t, preview.Letters, 2)
		}

		// A purge of pending letters is refused alike, up front.
		for _, yes := range [][]string{nil, {"--yes"}} {
			s.expect(seqboxcli.ExitUsage, append([]string{"dlq", "purge", "--status", "pending"}, yes...),
				"purge deletes only resolved or discarded letters")
		}

		// resolve of a discarded letter: the preview fails as --yes does.
		discarded := strconv.FormatInt(ids["bad2"], 10)
		code, out, errOut := run(t, "dlq", "resolve", "--id", discarded, "--dsn", dsn, "--prefix", s.prefix)
		assert.Equal(t, seqboxcli.ExitFailure, code, out)
		assert.NotContains(t, out, "would resolve")
		assert.Contains(t, errOut, "--yes would fail")
		assert.Contains(t, errOut, "it is discarded")
		s.expect(seqboxcli.ExitFailure, []string{"dlq", "resolve", "--id", discarded, "--yes"}, "it is discarded")
		// So does an id that names no letter, in a list too.
		s.expect(seqboxcli.ExitFailure, []string{"dlq", "replay", "--id", "999"}, "not found")
		s.expect(seqboxcli.ExitFailure, []string{"dlq", "list", "--id", "999"}, "not found")
		// and count --id counts those letters, not every letter.
		var counts struct {
			Pending, Discarded int
		}
		_, out, _ = run(t, "dlq", "count", "--id", discarded, "--json", "--dsn", dsn, "--prefix", s.prefix)
		if assert.NoError(t, json.Unmarshal([]byte(out), &counts)) {
			assert.Equal(t, 0, counts.Pending, "count --id counts the letter named, not every letter")
			assert.Equal(t, 1, counts.Discarded)
		}
		// A pending one previews and then resolves.
		pending := strconv.FormatInt(ids["bad3"], 10)
		require.Contains(t, s.cli(seqboxcli.ExitOK, "dlq", "resolve", "--id", pending), "would resolve 1 dead letter(s)")
		require.Contains(t, s.cli(seqboxcli.ExitOK, "dlq", "resolve", "--id", pending, "--yes"), "resolved 1 dead letter(s)")
	})
}

// TestNothingToDoSucceeds: an action with nothing to change exits 0 and
// says so; before, dlq purge --yes with nothing old enough, a bulk action
// matching no pending letter and partitions resume --all without a
// parked partition exited 1.
func TestNothingToDoSucceeds(t *testing.T) {
	onEachDB(t, func(t *testing.T, ctx context.Context, dsn string) {
		s := newScenario(ctx, t, dsn)
		ids := s.deadLetters("bad1")
		s.cli(seqboxcli.ExitOK, "dlq", "resolve", "--id", strconv.FormatInt(ids["bad1"], 10), "--yes")
		for _, tt := range []struct {
			args []string
			says string
		}{
			{[]string{"dlq", "purge", "--older-than", "1h", "--yes"}, "nothing to purge"},
			{[]string{"dlq", "replay", "--queue", "q", "--yes"}, "nothing to replay"},
			{[]string{"dlq", "discard", "--queue", "q"}, "nothing to discard"},
			{[]string{"partitions", "resume", "--queue", "q", "--all", "--yes"}, "nothing to do"},
			{[]string{"partitions", "skip", "--queue", "q", "--all"}, "nothing to do"},
		} {
			code, out, errOut := run(t, append(tt.args, "--dsn", dsn, "--prefix", s.prefix)...)
			assert.Equal(t, seqboxcli.ExitOK, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
			assert.Contains(t, out, tt.says, "%v", tt.args)
		}
		var counts struct{ Resolved int }
		require.NoError(t, json.Unmarshal([]byte(s.cli(seqboxcli.ExitOK, "dlq", "count", "--json")), &counts))
		require.Equal(t, 1, counts.Resolved, "nothing was purged")
	})
}

// TestBadValuesAreUsage: every bad flag value exits 2 before anything is
// read or changed. Before, a negative --older-than previewed (and with
// --yes purged every finished letter), a negative --watch printed once,
// --limit 0 listed a default page, a bad --prefix exited 1 in migrate,
// status and purge, and -h exited 2.
func TestBadValuesAreUsage(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"dlq", "purge", "--older-than", "-1h"}, "--older-than: -1h0m0s is negative"},
		{[]string{"dlq", "purge", "--older-than", "-1h", "--yes"}, "is negative"},
		{[]string{"dlq", "list", "--failed-from", "-1h"}, "--failed-from: -1h0m0s is negative"},
		{[]string{"dlq", "count", "--failed-to", "-5m"}, "--failed-to: -5m0s is negative"},
		{[]string{"dlq", "list", "--failed-from", "1h", "--failed-to", "2h"}, "--failed-from must be before --failed-to"},
		{[]string{"status", "--watch", "-1s"}, "--watch: -1s is negative"},
		{[]string{"dlq", "list", "--limit", "0"}, "--limit"},
		{[]string{"dlq", "list", "--after", "-3"}, "--after"},
		{[]string{"dlq", "list", "--limit", "x"}, `invalid value "x" for flag --limit`},
		{[]string{"dlq", "replay", "--id", "1,1"}, "given twice"},
		{[]string{"partitions", "resume", "--queue", "q", "--partition", "1,1"}, "given twice"},
		{[]string{"migrate", "--prefix", "Bad-Prefix"}, "--prefix"},
		{[]string{"migrate", "--status", "--prefix", "Bad-Prefix"}, "--prefix"},
		{[]string{"status", "--prefix", "Bad-Prefix"}, "--prefix"},
		{[]string{"purge", "--queue", "q", "--header", "a=b", "--prefix", "Bad-Prefix"}, "--prefix"},
		{[]string{"dlq", "list", "--prefix", "Bad-Prefix"}, "--prefix"},
		{[]string{"partitions", "list", "--prefix", "Bad-Prefix"}, "--prefix"},
	} {
		code, out, errOut := run(t, append(tt.args, "--dsn", db)...)
		if assert.Equal(t, seqboxcli.ExitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut) {
			assert.Contains(t, errOut, tt.stderr, "%v", tt.args)
			assert.Empty(t, out, "%v", tt.args)
		}
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(strings.TrimPrefix(db, "sqlite:")), "x.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "usage errors touch no database")

	for _, args := range [][]string{{"status", "-h"}, {"dlq", "list", "--help"}, {"partitions", "-h"}, {"migrate", "-h"},
		{"purge", "-h"}, {"version", "-h"}, {"bench", "-h"}} {
		code, out, errOut := run(t, args...)
		assert.Equal(t, seqboxcli.ExitOK, code, "%v: help is not an error\nstderr:\n%s", args, errOut)
		assert.Contains(t, out, "usage: seqbox", "%v: help goes to stdout", args)
	}
}

// TestSuggestions: an unknown command, action or flag is a usage error
// naming the nearest one; `seqbox help` documents the exit codes and the
// environment.
func TestSuggestions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"stauts"}, `unknown command "stauts" (did you mean "status"?)`},
		{[]string{"help", "partiton"}, `(did you mean "partitions"?)`},
		{[]string{"dlq", "lsit"}, `unknown action "lsit" (did you mean "list"?)`},
		{[]string{"partitions", "retyr"}, `(did you mean "retry"?)`},
		{[]string{"status", "--queu", "q"}, "unknown flag --queu (did you mean --queue?)"},
		{[]string{"dlq", "purge", "--older", "1h"}, "unknown flag --older (did you mean --older-than?)"},
		{[]string{"dlq", "list", "--dns", "x"}, "(did you mean --dsn?)"},
		{[]string{"demo", "--mesages", "1"}, "(did you mean --messages?)"},
		{[]string{"bench", "--duraton", "1s"}, "(did you mean --duration?)"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"` + "\n"},
	} {
		code, out, errOut := run(t, tt.args...)
		assert.Equal(t, seqboxcli.ExitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
		assert.Contains(t, errOut, tt.stderr, "%v", tt.args)
	}
	code, out, _ := run(t, "help")
	require.Equal(t, seqboxcli.ExitOK, code)
	for _, want := range []string{"Exit codes:", "0  success", "1  the command ran and failed", "2  bad command line",
		"SEQBOX_DSN", "SEQBOX_PREFIX", "version"} {
		require.Contains(t, out, want)
	}
}

// TestEnvironment: SEQBOX_DSN and SEQBOX_PREFIX stand in for --dsn and
// --prefix; a flag wins over them.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "env.db")
	env := map[string]string{seqboxcli.EnvDSN: dsn, seqboxcli.EnvPrefix: "envp_"}
	code, out, errOut := runEnv(t, env, "migrate", "--json")
	require.Equal(t, seqboxcli.ExitOK, code, errOut)
	require.Contains(t, out, `"prefix": "envp_"`)
	code, out, errOut = runEnv(t, env, "migrate", "--status")
	require.Equal(t, seqboxcli.ExitOK, code, errOut)
	require.Contains(t, out, `schema "envp_" at version`)
	require.Contains(t, out, "up to date")
	// Flags win: another prefix, another database.
	code, out, _ = runEnv(t, env, "migrate", "--status", "--prefix", "other_")
	require.Equal(t, seqboxcli.ExitOK, code)
	require.Contains(t, out, "migration(s) to apply")
	code, _, errOut = runEnv(t, env, "status", "--dsn", "sqlite:"+filepath.Join(dir, "typo.db"))
	require.Equal(t, seqboxcli.ExitFailure, code)
	require.Contains(t, errOut, "typo.db")
	// Without either, --dsn is required and says how else to give it.
	code, _, errOut = runEnv(t, nil, "status")
	require.Equal(t, seqboxcli.ExitUsage, code)
	require.Contains(t, errOut, "--dsn is required (or set SEQBOX_DSN)")
	code, _, errOut = runEnv(t, map[string]string{seqboxcli.EnvDSN: dsn, seqboxcli.EnvPrefix: "Bad"}, "status")
	require.Equal(t, seqboxcli.ExitUsage, code)
	require.Contains(t, errOut, "SEQBOX_PREFIX")
}

// TestMainReadsTheProcessEnvironment: Main (what cmd/seqbox runs) reads
// SEQBOX_DSN from the process. Not parallel: it sets the environment.
func TestMainReadsTheProcessEnvironment(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "main.db")
	t.Setenv(seqboxcli.EnvDSN, dsn)
	t.Setenv(seqboxcli.EnvPrefix, "")
	var out, errOut strings.Builder
	code := seqboxcli.Main(context.Background(), []string{"migrate"}, &out, &errOut)
	require.Equal(t, seqboxcli.ExitOK, code, errOut.String())
	require.Contains(t, out.String(), `schema "seqbox_"`)
}

// TestVersion: seqbox version prints the module version ("(devel)" in a
// test binary) and the Go version, as text and JSON.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "version")
	require.Equal(t, seqboxcli.ExitOK, code)
	require.Regexp(t, `^seqbox \S+.*, built with go\d`, out)
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	code, out, _ = run(t, "version", "--json")
	require.Equal(t, seqboxcli.ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.NotEmpty(t, v.Version)
	require.True(t, strings.HasPrefix(v.GoVersion, "go"), v.GoVersion)
	code, _, errOut := run(t, "version", "extra")
	require.Equal(t, seqboxcli.ExitUsage, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)
}

// TestReadOnlyCommandsCreateNoDatabase: a command that only reads (or
// only previews) refuses a SQLite file that does not exist, exiting 1,
// instead of creating an empty one; before, status --dsn sqlite:typo.db
// created typo.db. migrate creates it.
func TestReadOnlyCommandsCreateNoDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"status"}, {"status", "--partitions"}, {"dlq", "list"}, {"dlq", "count"},
		{"dlq", "show", "01a20c8c-7b51-7a7e-b260-fd4aebf0324e"}, {"dlq", "replay"}, {"dlq", "purge"},
		{"partitions", "list"}, {"partitions", "resume", "--queue", "q", "--all"}, {"migrate", "--status"},
		{"purge", "--queue", "q", "--header", "a=b"},
		// Nor do the actions: only migrate creates a database.
		{"dlq", "replay", "--yes"}, {"partitions", "skip", "--queue", "q", "--all", "--yes"},
	} {
		code, out, errOut := run(t, append(args, "--dsn", "sqlite:"+path)...)
		assert.Equal(t, seqboxcli.ExitFailure, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
		assert.Contains(t, errOut, "no such SQLite database file", "%v", args)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		if !assert.Empty(t, entries, "%v created a file", args) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.Mkdir(dir, 0o755))
		}
	}
	code, _, errOut := run(t, "migrate", "--dsn", "sqlite:"+path)
	require.Equal(t, seqboxcli.ExitOK, code, errOut)
	code, out, errOut := run(t, "status", "--dsn", "sqlite:"+path)
	require.Equal(t, seqboxcli.ExitOK, code, errOut)
	require.Contains(t, out, "QUEUE")
}

// TestPartitionsRetryAndSkipRetrying: a retrying partition (its head
// failed, the next try an hour away) is listed with its state; `seqbox
// partitions retry` makes its head due now and `skip` dead-letters it;
// resume refuses it, in the preview too. On each database.
func TestPartitionsRetryAndSkipRetrying(t *testing.T) {
	onEachDB(t, func(t *testing.T, ctx context.Context, dsn string) {
		s := newScenario(ctx, t, dsn, processor.Retry(time.Hour, time.Hour), processor.MaxAttempts(3))
		p0 := s.enqueue(0, "a", "bad1", "b")
		p1 := s.enqueue(1, "bad2", "c")
		var list struct {
			Partitions []struct {
				Partition int    `json:"partition"`
				State     string `json:"state"`
				HeadSeq   int64  `json:"head_seq"`
				Attempts  int    `json:"attempts"`
				LastError string `json:"last_error"`
				NextTry   string `json:"next_attempt_at"`
				InFlight  bool   `json:"in_flight"`
			} `json:"partitions"`
		}
		require.Eventually(t, func() bool {
			out := s.cli(seqboxcli.ExitOK, "partitions", "list", "--json")
			if json.Unmarshal([]byte(out), &list) != nil || len(list.Partitions) != 2 {
				return false
			}
			return !list.Partitions[0].InFlight && !list.Partitions[1].InFlight
		}, time.Minute, 20*time.Millisecond, "both partitions retry")
		require.Equal(t, "retrying", list.Partitions[0].State)
		require.Equal(t, int64(2), list.Partitions[0].HeadSeq)
		require.Equal(t, 1, list.Partitions[0].Attempts)
		require.Contains(t, list.Partitions[0].LastError, "cannot handle bad1")
		require.NotEmpty(t, list.Partitions[0].NextTry)
		out := s.cli(seqboxcli.ExitOK, "partitions", "list")
		require.Contains(t, out, "STATE")
		require.Contains(t, out, "retrying")
		require.Contains(t, out, "next 20", "the next try's time")

		errOut := s.cliErr(seqboxcli.ExitFailure, "partitions", "resume", "--queue", "q", "--partition", "0")
		require.Contains(t, errOut, "--yes would fail")
		require.Contains(t, errOut, "not parked")
		require.Contains(t, errOut, "partitions retry")
		out = s.cli(seqboxcli.ExitOK, "partitions", "retry", "--queue", "q", "--partition", "0")
		require.Contains(t, out, "would retry q/0 now")
		require.Contains(t, out, "nothing changed")
		require.Equal(t, []string{"a"}, s.log.of(0), "a preview changes nothing")

		s.fixed.Store(true)
		require.Contains(t, s.cli(seqboxcli.ExitOK, "partitions", "retry", "--queue", "q", "--partition", "0", "--yes"), "retrying q/0 now")
		require.NoError(t, s.ob.WaitProcessed(ctx, p0...))
		require.Equal(t, []string{"a", "bad1", "b"}, s.log.of(0), "retried now, not in an hour")

		require.Contains(t, s.cli(seqboxcli.ExitOK, "partitions", "skip", "--queue", "q", "--partition", "1"), "would skip q/1 (retrying)")
		var skipped struct {
			Results []struct {
				State     string `json:"state"`
				MessageID string `json:"dead_lettered_message_id"`
				Error     string `json:"error"`
			} `json:"results"`
		}
		require.NoError(t, json.Unmarshal([]byte(s.cli(seqboxcli.ExitOK, "partitions", "skip", "--queue", "q", "--partition", "1", "--yes", "--json")), &skipped))
		require.Len(t, skipped.Results, 1)
		require.Equal(t, "retrying", skipped.Results[0].State)
		require.Equal(t, p1[0].String(), skipped.Results[0].MessageID)
		require.Empty(t, skipped.Results[0].Error)
		require.NoError(t, s.ob.WaitProcessed(ctx, p1...))
		require.Equal(t, []string{"c"}, s.log.of(1))
		require.Contains(t, s.cli(seqboxcli.ExitOK, "dlq", "list", "--queue", "q"), "skipped by an operator while retrying")

		require.Contains(t, s.cli(seqboxcli.ExitOK, "partitions", "list"), "no retrying or parked partitions")
		errOut = s.cliErr(seqboxcli.ExitFailure, "partitions", "retry", "--queue", "q", "--partition", "0", "--yes")
		require.Contains(t, errOut, "not retrying")
		errOut = s.cliErr(seqboxcli.ExitFailure, "partitions", "skip", "--queue", "q", "--partition", "7")
		require.Contains(t, errOut, "no such queue partition")
	})
}
