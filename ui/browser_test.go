package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/processor"
)

// The browser tests (docs/ARCHITECTURE.md, "The web UI"): on each
// database, the UI is served under a prefix behind an auth-like
// middleware, and a node script in e2e/ drives Debian's chromium through
// playwright-core against it. Go sets up and verifies the outbox; the
// script only clicks and reads, as an operator would.

const (
	chromiumPath = "/usr/bin/chromium"
	// mount is where the test server mounts the UI.
	mount = "/ops/seqbox/"

	parkQueue   = "e2e.park"
	raceQueue   = "e2e.race"
	replayQueue = "e2e.replay"
	// The handler's errors while broken, by payload prefix; the markup
	// in them must reach the browser as text.
	poisonError = `poison <b>rejected</b>: downstream said no`
	replayError = `replay-me <b>timeout</b> from downstream`
	otherError  = `unrelated failure`
)

// browserTools returns node's path when everything the browser tests need
// is installed. When something is missing it fails the test under
// CI=true and skips it, loudly, otherwise.
func browserTools(t *testing.T) string {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node (Node.js 20 or later)")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" (apt-get install chromium)")
	}
	if _, err := os.Stat("e2e/node_modules/playwright-core/package.json"); err != nil {
		missing = append(missing, "ui/e2e/node_modules (cd ui/e2e && npm ci)")
	}
	if len(missing) == 0 {
		return node
	}
	msg := "browser tests need " + strings.Join(missing, ", ")
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING BROWSER TESTS: %s ***\n\n", msg)
	t.Skip(msg)
	return ""
}

// recorder is the handler of the e2e queues. While broken it fails every
// message whose payload names an error (poisonError, replayError,
// otherError); otherwise it records each payload delivered, by partition.
type recorder struct {
	broken atomic.Bool
	mu     sync.Mutex
	got    map[string][]string
}

func (r *recorder) handle(_ context.Context, d processor.Delivery) error {
	if r.broken.Load() {
		switch p := string(d.Payload); {
		case strings.HasPrefix(p, "poison"):
			return errors.New(poisonError)
		case strings.HasPrefix(p, "replay"):
			return errors.New(replayError)
		case strings.HasPrefix(p, "other"):
			return errors.New(otherError)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(d.Queue, d.Partition)
	r.got[k] = append(r.got[k], string(d.Payload))
	return nil
}

func (r *recorder) delivered(queue string, partition int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got[key(queue, partition)]...)
}

func key(queue string, partition int) string { return queue + "/" + strconv.Itoa(partition) }

// browserEnv is an env with the e2e queues, served at url+mount.
type browserEnv struct {
	*env
	rec  *recorder
	db   string
	node string
	url  string
}

func newBrowserEnv(t *testing.T, node string, o dbtest.Opener) *browserEnv {
	rec := &recorder{got: map[string][]string{}}
	h := processor.Leased(rec.handle)
	park := []processor.QueueOption{processor.MaxAttempts(2), processor.Retry(time.Millisecond, 2*time.Millisecond), processor.OnFailure(processor.Park)}
	e := newEnv(t, o.Open,
		queueDef{parkQueue, 4, h, park},
		queueDef{raceQueue, 2, h, park},
		queueDef{replayQueue, 3, h, []processor.QueueOption{processor.MaxAttempts(1), processor.OnFailure(processor.DeadLetter)}})
	mux := http.NewServeMux()
	mux.Handle(mount, operator(http.StripPrefix(strings.TrimSuffix(mount, "/"), e.h)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &browserEnv{env: e, rec: rec, db: o.Name, node: node, url: srv.URL + mount}
}

// operator stands for the application's auth middleware: it lets in only
// requests that say who they are (the browser sets X-User on every
// request), which the UI's WithIdentity then logs.
func operator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-User") == "" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// run runs e2e/<script> against the UI with params as E2E_* variables,
// failing the test with the script's output when it fails.
func (b *browserEnv) run(t *testing.T, script string, params map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, "e2e/"+script, b.url)
	cmd.Env = append(os.Environ(), "E2E_CHROMIUM="+chromiumPath, "E2E_DB="+b.db)
	for k, v := range params {
		cmd.Env = append(cmd.Env, "E2E_"+k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node e2e/%s %s: %v\n%s", script, b.url, err, out)
	}
	t.Logf("node e2e/%s: %s(%s)", script, out, time.Since(start).Round(time.Millisecond))
}

// eventually waits for observable progress: cond holding, within a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// enqueueAll enqueues payloads into one partition, returning them.
func (b *browserEnv) enqueueAll(queue string, partition int, payloads ...string) []string {
	for _, p := range payloads {
		b.enqueue(queue, partition, p)
	}
	return payloads
}

func series(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

// letters counts a partition's dead letters in a status.
func (b *browserEnv) letters(t *testing.T, queue string, partition int, status deadletter.Status) int64 {
	n, err := b.admin.DeadLetters().Count(b.ctx, deadletter.Filter{Queue: queue, Partitions: []int{partition}})
	require.NoError(t, err)
	return n[status]
}

func (b *browserEnv) backlog(t *testing.T, queue string, partition int) int64 {
	st, err := b.admin.Stats(b.ctx)
	require.NoError(t, err)
	for _, p := range st.Partitions {
		if p.Queue == queue && p.Partition == partition {
			return p.Incoming + p.Unprocessed
		}
	}
	t.Fatalf("no partition %s", key(queue, partition))
	return 0
}

// actionLine is one line of the UI's action log.
type actionLine struct {
	Msg, Who, Action, Queue, Partition, Outcome string
}

func (b *browserEnv) actions(t *testing.T, queue string) []actionLine {
	var out []actionLine
	for _, l := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		var a actionLine
		require.NoError(t, json.Unmarshal([]byte(l), &a), l)
		if a.Msg == "seqbox ui action" && a.Queue == queue {
			out = append(out, a)
		}
	}
	return out
}

func TestBrowser(t *testing.T) {
	node := browserTools(t)
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			b := newBrowserEnv(t, node, o)

			// Every scenario's failure at once, so the waits overlap:
			// a poison head parks a partition of parkQueue and of
			// raceQueue with messages behind it; replayQueue dead-letters
			// what it is given.
			b.rec.broken.Store(true)
			parked := append([]string{"poison 0"}, series("behind", 5)...)
			b.enqueueAll(parkQueue, 2, parked...)
			raced := append([]string{"poison 0"}, series("behind", 3)...)
			b.enqueueAll(raceQueue, 1, raced...)
			replayed := b.enqueueAll(replayQueue, 1, series("replay", 5)...)
			b.enqueueAll(replayQueue, 2, series("other", 2)...)
			b.waitState(parkQueue, 2, func(s seqbox.PartitionState) bool { return s.State == seqbox.StateParked })
			b.waitState(raceQueue, 1, func(s seqbox.PartitionState) bool { return s.State == seqbox.StateParked })
			eventually(t, "the replay queue's dead letters", func() bool {
				return b.letters(t, replayQueue, 1, deadletter.StatusPending) == 5 && b.letters(t, replayQueue, 2, deadletter.StatusPending) == 2
			})
			// The cause fixed, as an operator would before resuming.
			b.rec.broken.Store(false)

			t.Run("park", func(t *testing.T) {
				b.run(t, "park.mjs", map[string]string{"QUEUE": parkQueue, "PARTITION": "2", "ERROR": poisonError, "COUNT": strconv.Itoa(len(parked))})
				require.Equal(t, parked, b.rec.delivered(parkQueue, 2), "every message once, in order")
				require.Zero(t, b.backlog(t, parkQueue, 2))
				require.Equal(t, seqbox.StateOK, b.state(parkQueue, 2).State)
				a := b.actions(t, parkQueue)
				require.Len(t, a, 1)
				require.Equal(t, actionLine{"seqbox ui action", "alice", "resume", parkQueue, "2", "resumed: the head is retried now"}, a[0])
			})

			t.Run("race", func(t *testing.T) {
				b.run(t, "race.mjs", map[string]string{"QUEUE": raceQueue, "PARTITION": "1"})
				require.Equal(t, raced, b.rec.delivered(raceQueue, 1), "every message once, in order")
				a := b.actions(t, raceQueue)
				require.Len(t, a, 2, "%+v", a)
				require.Equal(t, actionLine{"seqbox ui action", "alice", "resume", raceQueue, "1", "resumed: the head is retried now"}, a[0], "one resume acted")
				require.Equal(t, "bob", a[1].Who)
				require.True(t, strings.HasPrefix(a[1].Outcome, "not done: partition changed since it was shown"), a[1].Outcome)
			})

			t.Run("replay", func(t *testing.T) {
				code, _ := do(t, b.h, "GET", "/deadletters", nil)
				if code == http.StatusNotFound {
					t.Skip("dead-letter screens not merged yet")
				}
				b.run(t, "replay.mjs", map[string]string{"QUEUE": replayQueue, "ERROR": replayError, "COUNT": strconv.Itoa(len(replayed))})
				require.Equal(t, replayed, b.rec.delivered(replayQueue, 1), "every replayed letter once, in the original order")
				require.EqualValues(t, len(replayed), b.letters(t, replayQueue, 1, deadletter.StatusResolved), "the script saw them resolved")
				require.Empty(t, b.rec.delivered(replayQueue, 2), "the filter left the other letters alone")
				require.EqualValues(t, 2, b.letters(t, replayQueue, 2, deadletter.StatusPending))
			})
		})
	}
}
