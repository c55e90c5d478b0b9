package seqboxcli_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// orderLog records, per partition, the payloads a handler delivered, in
// delivery order, with replays marked by the payload of their original.
type orderLog struct {
	mu  sync.Mutex
	got map[int][]string
}

func (l *orderLog) add(partition int, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[partition] = append(l.got[partition], payload)
}

func (l *orderLog) of(partition int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got[partition]...)
}

// scenario is an outbox on one CLI target whose handler fails payloads
// starting with "bad" until fixed.
type scenario struct {
	t      *testing.T
	ctx    context.Context
	dsn    string
	db     *bun.DB
	prefix string
	ob     *seqbox.Outbox
	fixed  atomic.Bool
	log    orderLog
}

func newScenario(ctx context.Context, t *testing.T, dsn string, opts ...processor.QueueOption) *scenario {
	s := &scenario{t: t, ctx: ctx, dsn: dsn, log: orderLog{got: map[int][]string{}}}
	s.db, s.prefix = cliDB(ctx, t, dsn)
	h := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if strings.HasPrefix(string(d.Payload), "bad") && !s.fixed.Load() {
			return errors.New("cannot handle " + string(d.Payload))
		}
		name := string(d.Payload)
		if d.Headers[deadletter.ReplayOfHeader] != "" {
			name = "replay:" + name
		}
		s.log.add(d.Partition, name)
		return nil
	})
	opts = append([]processor.QueueOption{processor.MaxAttempts(2), processor.Retry(2*time.Millisecond, 5*time.Millisecond)}, opts...)
	ob, err := seqbox.New(s.db).TablePrefix(s.prefix).Migrate(true).Logger(slog.New(slog.DiscardHandler)).PollInterval(50*time.Millisecond).
		ReconcileInterval(200*time.Millisecond).Queue("q", 2, h, opts...).Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	s.ob = ob
	return s
}

func (s *scenario) enqueue(partition int, payloads ...string) []outbox.MessageID {
	var ids []outbox.MessageID
	for _, p := range payloads {
		id, err := s.ob.Enqueue(s.ctx, s.db, "q", outbox.Message{Partition: partition, PayloadType: "t", Payload: []byte(p)})
		require.NoError(s.t, err)
		ids = append(ids, id)
	}
	return ids
}

func (s *scenario) cli(want int, args ...string) string {
	s.t.Helper()
	code, out, errOut := run(s.t, append(args, "--dsn", s.dsn, "--prefix", s.prefix)...)
	require.Equal(s.t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
	return out
}

// TestScenarioReplayAfterFix: a handler fails on some payloads, they
// dead-letter, the bug is fixed, `seqbox dlq replay --queue q --yes`
// delivers each once, after everything already in its partition and in
// their original order, and the letters end resolved. On each database.
func TestScenarioReplayAfterFix(t *testing.T) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := newScenario(ctx, t, dsn)
			first := append(s.enqueue(0, "a", "bad1", "b", "bad2", "c"), s.enqueue(1, "bad3", "d")...)
			require.NoError(t, s.ob.WaitProcessed(ctx, first...))
			later := s.enqueue(0, "e")
			require.NoError(t, s.ob.WaitProcessed(ctx, later...))
			require.Equal(t, []string{"a", "b", "c", "e"}, s.log.of(0))

			s.fixed.Store(true)
			out := s.cli(seqboxcli.ExitOK, "dlq", "replay", "--queue", "q")
			require.Contains(t, out, "nothing changed")
			out = s.cli(seqboxcli.ExitOK, "dlq", "replay", "--queue", "q", "--yes", "--json")
			var replayed struct {
				ReplayIDs []string `json:"replay_ids"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &replayed))
			require.Len(t, replayed.ReplayIDs, 3)
			require.Eventually(t, func() bool {
				var c seqboxcli.DeadLetterCounts
				return json.Unmarshal([]byte(s.cli(seqboxcli.ExitOK, "dlq", "count", "--json")), &c) == nil &&
					c == seqboxcli.DeadLetterCounts{Resolved: 3, Total: 3}
			}, time.Minute, 50*time.Millisecond, "every letter ends resolved")
			require.Equal(t, []string{"a", "b", "c", "e", "replay:bad1", "replay:bad2"}, s.log.of(0),
				"each replay once, after what was already there, in the original order")
			require.Equal(t, []string{"d", "replay:bad3"}, s.log.of(1))
		})
	}
}

// TestScenarioParkAndResume: under the Park policy the partition stops at
// the failing head (status and partitions list show it), nothing behind it
// is delivered, and `seqbox partitions resume` delivers the head and then
// the rest, in order; `seqbox partitions skip` dead-letters a head and
// delivers the rest. On each database.
func TestScenarioParkAndResume(t *testing.T) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := newScenario(ctx, t, dsn, processor.OnFailure(processor.Park))
			p0 := s.enqueue(0, "a", "bad1", "b", "c")
			p1 := s.enqueue(1, "x", "bad2", "y")
			var list seqboxcli.PartitionsListJSON
			require.Eventually(t, func() bool {
				list = seqboxcli.PartitionsListJSON{}
				if json.Unmarshal([]byte(s.cli(seqboxcli.ExitOK, "partitions", "list", "--json")), &list) != nil || len(list.Partitions) != 2 {
					return false
				}
				return list.Partitions[0].State == "parked" && list.Partitions[1].State == "parked"
			}, time.Minute, 20*time.Millisecond, "both partitions park")
			require.Equal(t, 0, list.Partitions[0].Partition)
			require.Equal(t, int64(2), list.Partitions[0].HeadSeq)
			require.Equal(t, 2, list.Partitions[0].Attempts)
			require.Contains(t, list.Partitions[0].LastError, "cannot handle bad1")
			require.Contains(t, s.cli(seqboxcli.ExitOK, "partitions", "list"), "cannot handle bad2")
			status := s.cli(seqboxcli.ExitOK, "status")
			require.Contains(t, status, "PARKED")
			require.Contains(t, status, "2 partition(s) parked")
			require.Contains(t, s.cli(seqboxcli.ExitOK, "status", "--partitions"), "parked")
			time.Sleep(200 * time.Millisecond) // a negative check: a few polls pass
			require.Equal(t, []string{"a"}, s.log.of(0), "nothing overtakes the parked head")

			s.fixed.Store(true)
			out := s.cli(seqboxcli.ExitOK, "partitions", "resume", "--queue", "q", "--partition", "0")
			require.Contains(t, out, "would resume q/0")
			require.Contains(t, out, "nothing changed")
			time.Sleep(100 * time.Millisecond)
			require.Equal(t, []string{"a"}, s.log.of(0), "a preview changes nothing")
			out = s.cli(seqboxcli.ExitOK, "partitions", "resume", "--queue", "q", "--partition", "0", "--yes")
			require.Contains(t, out, "resumed q/0")
			require.NoError(t, s.ob.WaitProcessed(ctx, p0...))
			require.Equal(t, []string{"a", "bad1", "b", "c"}, s.log.of(0), "the head, then the rest, in order")

			out = s.cli(seqboxcli.ExitOK, "partitions", "skip", "--queue", "q", "--all", "--yes", "--json")
			var skipped struct {
				Results []struct {
					Partition int    `json:"partition"`
					MessageID string `json:"dead_lettered_message_id"`
				} `json:"results"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &skipped))
			require.Len(t, skipped.Results, 1)
			require.Equal(t, p1[1].String(), skipped.Results[0].MessageID)
			require.NoError(t, s.ob.WaitProcessed(ctx, p1...))
			require.Equal(t, []string{"x", "y"}, s.log.of(1))
			require.Contains(t, s.cli(seqboxcli.ExitOK, "dlq", "list", "--queue", "q"), "skipped by an operator")
			require.Contains(t, s.cli(seqboxcli.ExitOK, "partitions", "list"), "no retrying or parked partitions")

			code, _, errOut := run(t, "partitions", "resume", "--queue", "q", "--partition", "0", "--yes", "--dsn", dsn, "--prefix", s.prefix)
			require.Equal(t, seqboxcli.ExitFailure, code)
			require.Contains(t, errOut, "not parked")
			require.Contains(t, errOut, "another operator")
			code, _, errOut = run(t, "partitions", "skip", "--queue", "q", "--partition", "9", "--yes", "--dsn", dsn, "--prefix", s.prefix)
			require.Equal(t, seqboxcli.ExitFailure, code)
			require.Contains(t, errOut, "no such queue partition")
		})
	}
}

func TestPartitionsUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"partitions"}, seqboxcli.ExitUsage, "Actions:"},
		{[]string{"partitions", "frob"}, seqboxcli.ExitUsage, `unknown action "frob"`},
		{[]string{"partitions", "list"}, seqboxcli.ExitUsage, "--dsn is required"},
		{[]string{"partitions", "resume", "--dsn", "sqlite:x.db"}, seqboxcli.ExitUsage, "--queue is required"},
		{[]string{"partitions", "resume", "--dsn", "sqlite:x.db", "--queue", "q"}, seqboxcli.ExitUsage, "give --partition or --all"},
		{[]string{"partitions", "skip", "--dsn", "sqlite:x.db", "--queue", "q", "--all", "--partition", "1"}, seqboxcli.ExitUsage, "give --partition or --all"},
		{[]string{"partitions", "skip", "--dsn", "sqlite:x.db", "--queue", "q", "--partition", "-1"}, seqboxcli.ExitUsage, "want partition numbers"},
		{[]string{"partitions", "list", "--dsn", "sqlite:x.db", "extra"}, seqboxcli.ExitUsage, `unexpected argument "extra"`},
	} {
		code, out, errOut := run(t, tt.args...)
		require.Equal(t, tt.code, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
		require.Contains(t, errOut, tt.stderr)
	}
	code, out, _ := run(t, "help", "partitions")
	require.Equal(t, seqboxcli.ExitOK, code)
	require.Contains(t, out, "usage: seqbox partitions")
	require.Contains(t, out, "-all")
}

// TestScenarioPurgeTenant: a tenant is deleted while its messages wait
// behind a parked head: `seqbox purge` previews them, then removes them
// with --yes, and once the partition is resumed only the other tenant's
// messages are delivered. On each database.
func TestScenarioPurgeTenant(t *testing.T) {
	for name, dsn := range cliTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := newScenario(ctx, t, dsn, processor.OnFailure(processor.Park))
			msg := func(payload, tenant string) outbox.Message {
				return outbox.Message{PayloadType: "t", Payload: []byte(payload), Headers: map[string]string{"tenant": tenant}}
			}
			ids, err := s.ob.EnqueueBatch(ctx, s.db, "q", []outbox.Message{msg("bad1", "7"), msg("a1", "42"), msg("a2", "42"), msg("b", "7")})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return strings.Contains(s.cli(seqboxcli.ExitOK, "partitions", "list"), "cannot handle bad1")
			}, time.Minute, 20*time.Millisecond, "the partition parks")
			require.Eventually(t, func() bool {
				return strings.Contains(s.cli(seqboxcli.ExitOK, "purge", "--queue", "q", "--header", "tenant=42"), "would purge 2 message(s)")
			}, time.Minute, 20*time.Millisecond, "both sequenced")
			out := s.cli(seqboxcli.ExitOK, "purge", "--queue", "q", "--header", "tenant=42")
			require.Contains(t, out, "nothing changed")
			require.Contains(t, out, "NOT SEQUENCED")

			out = s.cli(seqboxcli.ExitOK, "purge", "--queue", "q", "--header", "tenant=42", "--yes", "--json")
			var purged struct {
				DryRun   bool `json:"dry_run"`
				Incoming int  `json:"incoming"`
				Outgoing int  `json:"outgoing"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &purged))
			require.Equal(t, 2, purged.Outgoing)
			require.False(t, purged.DryRun)
			require.Contains(t, s.cli(seqboxcli.ExitOK, "purge", "--queue", "q", "--header", "tenant=42"), "would purge 0 message(s)")

			s.fixed.Store(true)
			s.cli(seqboxcli.ExitOK, "partitions", "resume", "--queue", "q", "--all", "--yes")
			require.NoError(t, s.ob.WaitProcessed(ctx, ids...))
			require.Equal(t, []string{"bad1", "b"}, s.log.of(0), "the purged tenant's messages never delivered")

			code, _, errOut := run(t, "purge", "--queue", "nope", "--header", "tenant=42", "--dsn", dsn, "--prefix", s.prefix)
			require.Equal(t, seqboxcli.ExitFailure, code)
			require.Contains(t, errOut, "not registered")
		})
	}
}

func TestPurgeUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"purge", "--dsn", "sqlite:x.db", "--header", "a=b"}, "--queue is required"},
		{[]string{"purge", "--dsn", "sqlite:x.db", "--queue", "q"}, "--header is required"},
		{[]string{"purge", "--dsn", "sqlite:x.db", "--queue", "q", "--header", "novalue"}, "want name=value"},
		{[]string{"purge", "--dsn", "sqlite:x.db", "--queue", "q", "--header", "a=1", "--header", "a=2"}, "given twice"},
		{[]string{"purge", "--dsn", "sqlite:x.db", "--queue", "q", "--header", "a=\xff"}, "invalid purge filter"},
		{[]string{"purge", "--queue", "q", "--header", "a=b"}, "--dsn is required"},
		{[]string{"purge", "--dsn", "sqlite:x.db", "--queue", "q", "--header", "a=b", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := run(t, tt.args...)
		require.Equal(t, seqboxcli.ExitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", tt.args, out, errOut)
		require.Contains(t, errOut, tt.stderr)
	}
}
