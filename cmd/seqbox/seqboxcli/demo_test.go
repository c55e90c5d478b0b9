package seqboxcli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
)

// tourDelivery is one handler line of the tour's output.
type tourDelivery struct {
	partition int
	seq       int64
	key, typ  string
	outcome   string // "ok", "failed" or "rejected", from the line after it
}

var tourLine = regexp.MustCompile(`^   orders/(\d+)  seq (\d+)  key (\S+)\s+(\S+)\s+\{.*\}(  \(attempt \d+\))?$`)

// tourDeliveries reads the handler's lines from the tour's output.
func tourDeliveries(t *testing.T, out string) []tourDelivery {
	t.Helper()
	var got []tourDelivery
	for _, line := range strings.Split(out, "\n") {
		if m := tourLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[1])
			seq, _ := strconv.ParseInt(m[2], 10, 64)
			got = append(got, tourDelivery{partition: p, seq: seq, key: m[3], typ: m[4], outcome: "ok"})
			continue
		}
		if len(got) > 0 {
			switch {
			case strings.HasPrefix(line, "        -> failed"):
				got[len(got)-1].outcome = "failed"
			case strings.HasPrefix(line, "        -> rejected"):
				got[len(got)-1].outcome = "rejected"
			}
		}
	}
	return got
}

// shellSplit splits a printed command the way a POSIX shell would, for the
// quoting shellJoin produces (single quotes).
func shellSplit(t *testing.T, cmd string) []string {
	t.Helper()
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range cmd {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %q", cmd)
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// TestDemoTour: the tour on a SQLite file finishes by itself, shows every
// customer's messages in enqueue order with rising seqs, one failure
// retried and one rejection, and prints commands for the same file that
// work as printed.
func TestDemoTour(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	code, out, errOut := run(t, "demo", "--dsn", dsn)
	require.Equal(t, seqboxcli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Empty(t, errOut, "the tour logs nothing unless asked")

	got := tourDeliveries(t, out)
	byKey := map[string][]string{}
	lastSeq := map[int]int64{}
	for _, d := range got {
		require.GreaterOrEqual(t, d.seq, lastSeq[d.partition], "partition %d went back in seq:\n%s", d.partition, out)
		lastSeq[d.partition] = d.seq
		byKey[d.key] = append(byKey[d.key], strings.TrimSuffix(strings.TrimPrefix(d.typ, "order."), ".v1")+":"+d.outcome)
	}
	require.Equal(t, map[string][]string{
		"alice": {"created:ok", "paid:ok", "shipped:ok"},
		"bob":   {"created:ok", "paid:failed", "paid:ok", "shipped:ok"},
		"carol": {"created:ok", "paid:ok"},
		"dave":  {"created:rejected"},
	}, byKey, out)
	require.Contains(t, out, "(attempt 2)", "the retry is shown")
	require.Contains(t, out, "1 retried, 1 dead-lettered")

	// The commands printed, run as printed against the same file.
	var cmds [][]string
	for _, line := range strings.Split(out, "\n") {
		if cmd, ok := strings.CutPrefix(line, "  seqbox "); ok {
			args := shellSplit(t, cmd)
			require.Contains(t, strings.Join(args, " "), "--dsn "+dsn, line)
			cmds = append(cmds, args)
		}
	}
	want := []string{"status", "status --partitions", "dlq list", "dlq show", "dlq replay", "dlq replay"}
	require.Len(t, cmds, len(want), out)
	for i, args := range cmds {
		require.True(t, strings.HasPrefix(strings.Join(args, " "), want[i]), "command %d: %v", i, args)
		code, cout, cerr := run(t, args...)
		require.Equal(t, seqboxcli.ExitOK, code, "seqbox %v\nstdout:\n%s\nstderr:\n%s", args, cout, cerr)
		switch {
		case i == 0:
			require.Regexp(t, `(?m)^orders\s+4\s+0\s+0\s+\S+\s+0\s+0\s+1$`, cout, "status: nothing waiting, one dead letter")
		case args[0] == "dlq" && args[1] == "list":
			require.Contains(t, cout, `unknown item "unicorn"`)
		case args[0] == "dlq" && args[1] == "show":
			require.Contains(t, cout, `{"order":1004,"item":"unicorn"}`)
		case slices.Contains(args, "--yes"):
			require.Contains(t, cout, "replayed 1 dead letter(s)")
		case args[0] == "dlq" && args[1] == "replay":
			require.Contains(t, cout, "nothing changed")
		}
	}
	// The replay's copy waits: no outbox runs on the file now.
	code, cout, cerr := run(t, cmds[0]...)
	require.Equal(t, seqboxcli.ExitOK, code, cerr)
	require.Regexp(t, `(?m)^orders\s+4\s+1\s+0\s+`, cout)
}

// TestDemoTourDefault: with no --dsn the tour makes a SQLite file of its
// own, in the temporary directory, and leaves it for the commands it
// prints.
func TestDemoTourDefault(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp puts the tour's file
	code, out, errOut := run(t, "demo")
	require.Equal(t, seqboxcli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	m := regexp.MustCompile(`seqbox status --dsn sqlite:(\S+)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.True(t, strings.HasPrefix(m[1], tmp), "%s is not under %s", m[1], tmp)
	_, err := os.Stat(m[1])
	require.NoError(t, err, "the database is left in place")
	require.Contains(t, out, "The database is the SQLite file "+m[1])
	code, _, cerr := run(t, "dlq", "list", "--dsn", "sqlite:"+m[1])
	require.Equal(t, seqboxcli.ExitOK, code, cerr)
}
