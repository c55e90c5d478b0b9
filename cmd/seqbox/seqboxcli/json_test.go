package seqboxcli_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// TestJSONSchemas runs every command that takes --json, dry runs and
// refusals included, on a database holding a parked partition, a
// retrying one and dead letters of every kind, and checks that each
// prints one JSON document of its documented type (decoded with unknown
// fields refused), with snake_case keys each documented in docs/CLI.md,
// no null and no zero time. Before, status --partitions printed Go field
// names and zero times, partitions resume|skip without --yes printed
// text, and dlq list printed keys as base64. On each database.
func TestJSONSchemas(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "CLI.md"))
	require.NoError(t, err)
	onEachDB(t, func(t *testing.T, ctx context.Context, dsn string) {
		testJSONSchemas(t, ctx, dsn, string(doc))
	})
}

func testJSONSchemas(t *testing.T, ctx context.Context, dsn, doc string) {
	db, prefix := cliDB(ctx, t, dsn)
	h := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		switch p := string(d.Payload); {
		case strings.HasPrefix(p, "bad"):
			return errors.New("cannot handle " + p)
		case strings.HasPrefix(p, "rej"), !utf8.ValidString(p):
			return processor.Reject(errors.New("rejected"))
		}
		return nil
	})
	ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(slog.New(slog.DiscardHandler)).
		PollInterval(50*time.Millisecond).Queue("q", 4, h, processor.OnFailure(processor.Park), processor.MaxAttempts(2),
		processor.Retry(time.Hour, time.Hour)).Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	enqueue := func(m outbox.Message) outbox.MessageID {
		m.PayloadType = "t"
		id, err := ob.Enqueue(ctx, db, "q", m)
		require.NoError(t, err)
		return id
	}
	enqueue(outbox.Message{Partition: 0, Payload: []byte("bad-park")})
	enqueue(outbox.Message{Partition: 1, Payload: []byte("bad-retry"), Headers: map[string]string{"tenant": "7"}})
	// Keys of partition 3, away from the failing heads of 0 and 1.
	keyOn3 := func(prefix string) string {
		for i := 0; ; i++ {
			if k := prefix + strconv.Itoa(i); outbox.PartitionForKey(k, 4) == 3 {
				return k
			}
		}
	}
	textKey, binaryKey := keyOn3("k"), keyOn3("\xff\xfe")
	rejected := []outbox.MessageID{
		enqueue(outbox.Message{Payload: []byte("rej1"), Key: textKey, Headers: map[string]string{"tenant": "7"}}),
		enqueue(outbox.Message{Payload: []byte{0xff, 0x00, 0x01}, Key: binaryKey}),
		enqueue(outbox.Message{Partition: 3, Payload: []byte("rej3")}),
	}
	require.NoError(t, ob.WaitProcessed(ctx, rejected...))
	admin := ob.Admin().Partitions()
	require.Eventually(t, func() bool {
		list, err := admin.Failing(ctx, "q")
		return err == nil && len(list) == 2 && !list[0].InFlight && !list[1].InFlight
	}, time.Minute, 20*time.Millisecond, "two partitions retry")
	_, err = admin.RetryNow(ctx, "q", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := admin.State(ctx, "q", 0)
		return err == nil && st.State == seqbox.StateParked
	}, time.Minute, 20*time.Millisecond, "the second failure parks partition 0")

	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := run(t, append(args, "--dsn", dsn, "--prefix", prefix)...)
		require.Equal(t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
		return out
	}
	var list seqboxcli.DLQListJSON
	require.NoError(t, json.Unmarshal([]byte(cli(seqboxcli.ExitOK, "dlq", "list", "--json")), &list))
	require.Len(t, list.Letters, 3)
	id := func(i int) string { return strconv.FormatInt(list.Letters[i].ID, 10) }
	cli(seqboxcli.ExitOK, "dlq", "resolve", "--id", id(0), "--yes")

	// check runs one command with --json; a failure is reported and the
	// test goes on, so that every command is checked. It reports whether
	// the output is the documented document.
	check := func(want int, into any, args ...string) bool {
		t.Helper()
		code, out, errOut := run(t, append(args, "--json", "--dsn", dsn, "--prefix", prefix)...)
		ok := assert.Equal(t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
		return checkJSONDocument(t, args, out, into, doc) && ok
	}
	check(seqboxcli.ExitOK, &seqboxcli.MigrateJSON{}, "migrate", "--status")
	check(seqboxcli.ExitOK, &seqboxcli.MigrateJSON{}, "migrate")
	var status seqboxcli.StatusJSON
	if check(seqboxcli.ExitOK, &status, "status") && assert.Len(t, status.Queues, 1) {
		assert.Equal(t, 1, status.Queues[0].Parked)
		assert.Equal(t, 1, status.Queues[0].Retrying)
		assert.Equal(t, seqboxcli.DeadLetterCounts{Pending: 2, Resolved: 1, Total: 3}, status.Queues[0].DeadLetters)
	}
	check(seqboxcli.ExitOK, &seqboxcli.StatusJSON{}, "status", "--queue", "q")
	var parts seqboxcli.StatusPartitionsJSON
	if check(seqboxcli.ExitOK, &parts, "status", "--partitions") && assert.Len(t, parts.Partitions, 4) {
		assert.Equal(t, "parked", parts.Partitions[0].State)
		assert.Equal(t, "retrying", parts.Partitions[1].State)
		assert.Contains(t, parts.Partitions[1].LastError, "cannot handle bad-retry")
		assert.False(t, parts.Partitions[1].NextAttemptAt.IsZero())
		assert.True(t, parts.Partitions[2].NextAttemptAt.IsZero(), "an idle partition has no next attempt")
	}

	var letters seqboxcli.DLQListJSON
	if check(seqboxcli.ExitOK, &letters, "dlq", "list", "--payloads") && assert.Len(t, letters.Letters, 3) {
		assert.Equal(t, textKey, letters.Letters[0].Key, "a UTF-8 key is text")
		assert.Empty(t, letters.Letters[0].KeyEncoding)
		assert.Equal(t, "rej1", letters.Letters[0].Payload)
		assert.Equal(t, map[string]string{"tenant": "7"}, letters.Letters[0].Headers)
		assert.Equal(t, hex.EncodeToString([]byte(binaryKey)), letters.Letters[1].Key, "other bytes are hex")
		assert.Equal(t, "hex", letters.Letters[1].KeyEncoding)
		assert.Equal(t, "ff0001", letters.Letters[1].Payload)
		assert.Equal(t, "hex", letters.Letters[1].PayloadEncoding)
		assert.False(t, letters.Letters[0].CompletedAt.IsZero())
	}
	check(seqboxcli.ExitOK, &seqboxcli.DLQListJSON{}, "dlq", "list", "--limit", "1")
	check(seqboxcli.ExitOK, &seqboxcli.DLQListJSON{}, "dlq", "list", "--id", id(1))
	check(seqboxcli.ExitOK, &seqboxcli.DeadLetterCounts{}, "dlq", "count")
	check(seqboxcli.ExitOK, &seqboxcli.LetterJSON{}, "dlq", "show", rejected[1].String())
	var action seqboxcli.DLQActionJSON
	if check(seqboxcli.ExitOK, &action, "dlq", "replay", "--queue", "q") {
		assert.True(t, action.DryRun)
		assert.Equal(t, int64(2), action.Count)
	}
	check(seqboxcli.ExitOK, &seqboxcli.DLQActionJSON{}, "dlq", "resolve", "--id", id(1))
	check(seqboxcli.ExitOK, &seqboxcli.DLQActionJSON{}, "dlq", "discard", "--queue", "q", "--partition", "0")
	check(seqboxcli.ExitOK, &seqboxcli.DLQActionJSON{}, "dlq", "purge", "--older-than", "1h")
	action = seqboxcli.DLQActionJSON{}
	if check(seqboxcli.ExitOK, &action, "dlq", "purge", "--older-than", "0s") {
		assert.Equal(t, int64(1), action.Count)
		assert.False(t, action.CompletedBefore.IsZero())
	}
	check(seqboxcli.ExitOK, &seqboxcli.DLQActionJSON{}, "dlq", "discard", "--id", id(2), "--note", "n", "--yes")
	check(seqboxcli.ExitOK, &seqboxcli.DLQActionJSON{}, "dlq", "purge", "--older-than", "0s", "--yes")
	action = seqboxcli.DLQActionJSON{}
	if check(seqboxcli.ExitOK, &action, "dlq", "replay", "--yes") {
		assert.Len(t, action.ReplayIDs, 1)
	}

	var plist seqboxcli.PartitionsListJSON
	if check(seqboxcli.ExitOK, &plist, "partitions", "list") && assert.Len(t, plist.Partitions, 2) {
		assert.False(t, plist.Partitions[0].ParkedAt.IsZero())
		assert.True(t, plist.Partitions[0].NextAttemptAt.IsZero())
	}
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsListJSON{}, "partitions", "list", "--queue", "q")
	var pact seqboxcli.PartitionsActionJSON
	if check(seqboxcli.ExitOK, &pact, "partitions", "resume", "--queue", "q", "--partition", "0") && assert.Len(t, pact.Results, 1) {
		assert.True(t, pact.DryRun)
		assert.Equal(t, "parked", pact.Results[0].State)
	}
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsActionJSON{}, "partitions", "retry", "--queue", "q", "--all")
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsActionJSON{}, "partitions", "skip", "--queue", "q", "--partition", "0,1")
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsActionJSON{}, "partitions", "resume", "--queue", "q", "--all")
	pact = seqboxcli.PartitionsActionJSON{}
	if check(seqboxcli.ExitFailure, &pact, "partitions", "resume", "--queue", "q", "--partition", "1,9") && assert.Len(t, pact.Results, 2) {
		assert.Contains(t, pact.Results[0].Error, "not parked", "a refusal in a dry run is in the document too")
		assert.Contains(t, pact.Results[1].Error, "no such queue partition")
	}
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsActionJSON{}, "partitions", "skip", "--queue", "q", "--partition", "1", "--yes")
	check(seqboxcli.ExitOK, &seqboxcli.PartitionsActionJSON{}, "partitions", "retry", "--queue", "q", "--all", "--yes")

	check(seqboxcli.ExitOK, &seqboxcli.PurgeJSON{}, "purge", "--queue", "q", "--header", "tenant=7")
	check(seqboxcli.ExitOK, &seqboxcli.PurgeJSON{}, "purge", "--queue", "q", "--header", "tenant=7", "--yes")
	code, out, errOut := run(t, "version", "--json")
	assert.Equal(t, seqboxcli.ExitOK, code, errOut)
	checkJSONDocument(t, []string{"version"}, out, &seqboxcli.VersionJSON{}, doc)

	// status --watch --json: one document per line and refresh. The watch
	// is interrupted once it has printed twice, however long that takes.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wout := &cancelAfterLines{lines: 2, cancel: cancel}
	var werr bytes.Buffer
	code = seqboxcli.MainEnv(wctx, []string{"status", "--watch", "200ms", "--json", "--partitions", "--dsn", dsn, "--prefix", prefix},
		func(string) string { return "" }, wout, &werr)
	assert.Equal(t, seqboxcli.ExitOK, code, werr.String())
	lines := strings.Split(strings.TrimSpace(wout.String()), "\n")
	assert.GreaterOrEqual(t, len(lines), 2, "watch prints again")
	for _, line := range lines {
		checkJSONDocument(t, []string{"status", "--watch"}, line, &seqboxcli.StatusPartitionsJSON{}, doc)
	}
}

// snakeCase is a documented key.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkJSONDocument checks out is exactly one JSON document of into's
// type, with no field unknown to it, snake_case keys each named in doc (as
// `key`), no null and no zero time (headers hold the message's own keys).
// It reports failures without stopping the test, and whether there were
// none.
func checkJSONDocument(t *testing.T, args []string, out string, into any, doc string) bool {
	t.Helper()
	if !assert.True(t, json.Valid([]byte(out)), "%v: not JSON:\n%s", args, out) {
		return false
	}
	ok := true
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	ok = assert.NoError(t, dec.Decode(into), "%v: not the documented schema:\n%s", args, out) && ok
	_, err := dec.Token()
	ok = assert.ErrorIs(t, err, io.EOF, "%v: more than one document", args) && ok
	ok = assert.NotContains(t, out, "0001-01-01", "%v: a zero time", args) && ok
	var v any
	if !assert.NoError(t, json.Unmarshal([]byte(out), &v)) {
		return false
	}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case nil:
			ok = false
			t.Errorf("%v: null at %s", args, path)
		case map[string]any:
			for k, x := range v {
				if strings.HasSuffix(path, ".headers") {
					continue
				}
				ok = assert.Regexp(t, snakeCase, k, "%v: key %s.%s", args, path, k) && ok
				ok = assert.Contains(t, doc, "`"+k+"`", "%v: key %q is not documented in docs/CLI.md", args, k) && ok
				walk(x, path+"."+k)
			}
		case []any:
			for i, x := range v {
				walk(x, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(v, "$")
	return ok
}

// cancelAfterLines is an output that cancels once it holds lines
// occurrences of marker (a newline when empty): a watch is stopped after
// it has printed enough, however slow the machine.
type cancelAfterLines struct {
	bytes.Buffer
	lines  int
	marker string
	cancel context.CancelFunc
}

func (w *cancelAfterLines) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	marker := w.marker
	if marker == "" {
		marker = "\n"
	}
	if bytes.Count(w.Bytes(), []byte(marker)) >= w.lines {
		w.cancel()
	}
	return n, err
}
