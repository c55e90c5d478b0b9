package ui_test

import (
	"context"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/ui"
)

// evilQueue is the parked queue (names are [A-Za-z0-9._-], so the
// hostile queue name is tested through the URL, evilURLQueue); evilError
// is the error text of every failing delivery.
const (
	evilQueue    = `orders.v1-eu`
	evilURLQueue = `q<script>alert("q")</script>`
	evilError    = `<script>alert("err")</script> cannot handle`
)

// env is one database's outbox with, by construction:
//   - evilQueue: 4 partitions, Park after 2 attempts; partition 1's head fails always (parked);
//   - "slow": partition 0's head fails always and is retried in a day (retrying);
//   - "block": partition 0's head is being delivered until the test ends (busy).
type env struct {
	t     *testing.T
	ctx   context.Context
	db    *bun.DB
	ob    *seqbox.Outbox
	admin *seqbox.Admin
	logs  *dbtest.SyncBuffer
	h     *ui.Handler
}

// tenYears is the slow queue's retry delay.
const tenYears = 10 * 365 * 24 * time.Hour

func failing(ctx context.Context, d processor.Delivery) error {
	if strings.HasPrefix(string(d.Payload), "bad") {
		return errors.New(evilError)
	}
	return nil
}

// queueDef is a queue a test adds to newEnv's.
type queueDef struct {
	name string
	n    int
	h    processor.Handler
	opts []processor.QueueOption
}

func newEnv(t *testing.T, open func(testing.TB) *bun.DB, extra ...queueDef) *env {
	t.Helper()
	db := open(t)
	ctx := context.Background()
	release := make(chan struct{})
	blocking := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	b := seqbox.New(db).TablePrefix(dbtest.Prefix(t)).Migrate(true).
		Logger(slog.New(slog.DiscardHandler)).PollInterval(50*time.Millisecond).
		Queue(evilQueue, 4, processor.Leased(failing),
			processor.MaxAttempts(2), processor.Retry(time.Millisecond, 2*time.Millisecond), processor.OnFailure(processor.Park)).
		// Full jitter draws a retry delay in [0, max): ten years makes a
		// natural retry during the test (a stale page, a 409) a chance of
		// about 1 in 30 million per failure, where 24 h made it 1 in 10,000.
		Queue("slow", 2, processor.Leased(failing), processor.MaxAttempts(processor.MaxAttemptsNever), processor.Retry(tenYears, tenYears)).
		Queue("block", 1, blocking, processor.Lease(time.Hour, time.Second)).
		Queue("wide", 1024, processor.Leased(failing))
	for _, q := range extra {
		b = b.Queue(q.name, q.n, q.h, q.opts...)
	}
	ob, err := b.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		close(release)
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = ob.Stop(sctx)
	})
	e := &env{t: t, ctx: ctx, db: db, ob: ob, admin: ob.Admin(), logs: &dbtest.SyncBuffer{}}
	e.h, err = ui.New(e.admin, ui.WithLogger(slog.New(slog.NewJSONHandler(e.logs, nil))),
		ui.WithIdentity(func(r *http.Request) string { return r.Header.Get("X-User") }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.h.Close()) }) // before the outbox stops and the database closes
	e.enqueue(evilQueue, 1, "bad one")
	e.enqueue("slow", 0, "bad slow")
	e.enqueue("block", 0, "held")
	e.waitState(evilQueue, 1, func(s seqbox.PartitionState) bool { return s.State == seqbox.StateParked })
	e.waitState("slow", 0, func(s seqbox.PartitionState) bool { return s.State == seqbox.StateRetrying && !s.InFlight })
	return e
}

func (e *env) enqueue(queue string, partition int, payload string) {
	_, err := e.ob.Enqueue(e.ctx, e.db, queue, outbox.Message{Partition: partition, PayloadType: "t", Payload: []byte(payload)})
	require.NoError(e.t, err)
}

func (e *env) state(queue string, partition int) seqbox.PartitionState {
	s, err := e.admin.Partitions().State(e.ctx, queue, partition)
	require.NoError(e.t, err)
	return s
}

// waitState waits for observable progress: the partition reaching a state.
func (e *env) waitState(queue string, partition int, cond func(seqbox.PartitionState) bool) seqbox.PartitionState {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := e.state(queue, partition)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s/%d; last %+v", queue, partition, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func do(t *testing.T, h http.Handler, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	r.Header.Set("X-User", "alice")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

var (
	formRE  = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	inputRE = regexp.MustCompile(`name="(\w+)" value="([^"]*)"`)
)

// forms returns a page's POST forms by the last segment of their action,
// every hidden field kept (a filter may repeat "header").
func forms(page string) map[string]url.Values {
	out := map[string]url.Values{}
	for _, m := range formRE.FindAllStringSubmatch(page, -1) {
		v := url.Values{}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			v.Add(in[1], html.UnescapeString(in[2]))
		}
		action := html.UnescapeString(m[1])
		out[action[strings.LastIndex(action, "/")+1:]] = v
	}
	return out
}

func partPath(queue string, n string) string {
	return "/queues/" + url.PathEscape(queue) + "/partitions/" + n
}

func TestOptions(t *testing.T) {
	t.Parallel()
	_, err := ui.New(nil)
	require.Error(t, err)
	admin, err := seqbox.NewAdmin(context.Background(), dbtest.SQLite(t), dbtest.Prefix(t)) // no tables: the sampler's reads fail, logged
	require.NoError(t, err)
	_, err = ui.New(admin, ui.WithLogger(nil))
	require.ErrorContains(t, err, "nil logger")
	_, err = ui.New(admin, ui.WithIdentity(nil))
	require.ErrorContains(t, err, "nil func")
	_, err = ui.New(admin, nil)
	require.Error(t, err)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err = ui.New(admin, ui.WithSampleInterval(d))
		require.ErrorContains(t, err, "not positive")
	}
	h, err := ui.New(admin, ui.ReadOnly(), ui.WithLogger(slog.New(slog.DiscardHandler)), ui.WithIdentity(func(*http.Request) string { return "x" }),
		ui.WithSampleInterval(time.Minute))
	require.NoError(t, err)
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "idempotent")
}

func TestUI(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			testUI(t, newEnv(t, o.Open))
		})
	}
}

func testUI(t *testing.T, e *env) {
	evilPath := "/queues/" + url.PathEscape(evilQueue)
	parked, retrying := partPath(evilQueue, "1"), partPath("slow", "0")

	t.Run("overview", func(t *testing.T) {
		code, body := do(t, e.h, "GET", "/", nil)
		require.Equal(t, http.StatusOK, code)
		for _, q := range []string{"slow", "block"} {
			require.Contains(t, body, `href="./queues/`+q+`"`)
		}
		require.Contains(t, body, html.EscapeString(evilQueue))
		require.Contains(t, body, `./queues/`+url.PathEscape(evilQueue)+`/partitions/1"`, "the parked partition, linked")
		require.Contains(t, body, `./queues/slow/partitions/0"`, "the retrying partition, linked")
		require.Contains(t, body, `<span class="state st-parked">parked</span>`)
		require.Contains(t, body, `<span class="state st-retrying">retrying</span>`)
		noScript(t, body)
	})

	t.Run("grid", func(t *testing.T) {
		code, body := do(t, e.h, "GET", evilPath, nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 4, strings.Count(body, `<a class="cell st-`), "4 cells")
		require.Contains(t, body, `class="cell st-parked" href="../queues/`+url.PathEscape(evilQueue)+`/partitions/1"`)
		require.Contains(t, body, `>all 4</a>`)
		require.Contains(t, body, `>parked 1</a>`)
		require.Contains(t, body, `>idle 3</a>`)
		noScript(t, body)

		code, body = do(t, e.h, "GET", evilPath+"?state=parked", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 1, strings.Count(body, `<a class="cell`))
		require.Contains(t, body, `/partitions/1"`)
		code, body = do(t, e.h, "GET", evilPath+"?state=idle", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 3, strings.Count(body, `<a class="cell st-idle`))
		code, body = do(t, e.h, "GET", "/queues/block?state=busy", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 1, strings.Count(body, `<a class="cell st-busy`))
		code, body = do(t, e.h, "GET", "/queues/slow?state=retrying", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 1, strings.Count(body, `<a class="cell st-retrying`))

		code, body = do(t, e.h, "GET", "/queues/wide", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 1024, strings.Count(body, `<a class="cell st-idle`), "1,024 partitions on one page")
		require.Contains(t, body, `href="../queues/wide/partitions/1023"`)

		code, _ = do(t, e.h, "GET", evilPath+"?state=bogus", nil)
		require.Equal(t, http.StatusBadRequest, code)
		code, _ = do(t, e.h, "GET", "/queues/nope", nil)
		require.Equal(t, http.StatusNotFound, code)
		code, body = do(t, e.h, "GET", "/queues/"+url.PathEscape(evilURLQueue), nil)
		require.Equal(t, http.StatusNotFound, code)
		require.Contains(t, body, `q&lt;script&gt;alert(`)
		noScript(t, body)
		code, body = do(t, e.h, "GET", partPath(evilURLQueue, "0"), nil)
		require.Equal(t, http.StatusNotFound, code)
		noScript(t, body)
		code, _ = do(t, e.h, "POST", "/queues/slow", url.Values{})
		require.Equal(t, http.StatusMethodNotAllowed, code)
	})

	t.Run("partition", func(t *testing.T) {
		code, body := do(t, e.h, "GET", parked, nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `<span class="state st-parked">parked</span>`)
		require.Contains(t, body, html.EscapeString(evilError))
		noScript(t, body)
		f := forms(body)
		require.Contains(t, f, "resume")
		require.Contains(t, f, "skip")
		require.NotContains(t, f, "retry")
		require.Equal(t, "parked", f["resume"].Get("state"))
		require.Equal(t, "2", f["resume"].Get("attempts"))

		code, body = do(t, e.h, "GET", retrying, nil)
		require.Equal(t, http.StatusOK, code)
		f = forms(body)
		require.Contains(t, f, "retry")
		require.Contains(t, f, "skip")
		require.NotContains(t, f, "resume")

		code, body = do(t, e.h, "GET", partPath(evilQueue, "2"), nil)
		require.Equal(t, http.StatusOK, code)
		require.Empty(t, forms(body), "an idle partition has no action")

		for _, p := range []string{partPath(evilQueue, "99"), partPath(evilQueue, "x"), partPath(evilQueue, "-1"), partPath("nope", "0")} {
			code, _ = do(t, e.h, "GET", p, nil)
			require.Equal(t, http.StatusNotFound, code, p)
		}
		code, _ = do(t, e.h, "PUT", parked, url.Values{})
		require.Equal(t, http.StatusMethodNotAllowed, code)
	})

	t.Run("messages", func(t *testing.T) {
		// Behind block's held head: a hostile JSON payload and a binary one.
		hostile := `{"x":"<script>alert(\"p\")</script>"}`
		for _, p := range [][]byte{[]byte(hostile), {0xff, 0x00, 0x01}} {
			_, err := e.ob.Enqueue(e.ctx, e.db, "block", outbox.Message{Key: `k<i>`, PayloadType: "t", Payload: p,
				Headers: map[string]string{"h": `<b>"v"</b>`}})
			require.NoError(t, err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			msgs, err := e.admin.Partitions().Messages(e.ctx, "block", 0, 0)
			require.NoError(t, err)
			if len(msgs) == 3 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the two messages are sequenced behind the head")
			time.Sleep(10 * time.Millisecond)
		}
		code, body := do(t, e.h, "GET", partPath("block", "0"), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `<pre class="payload">held</pre>`, "the head's payload, as text")
		require.Contains(t, body, "Behind the head")
		require.Contains(t, body, html.EscapeString(hostile), "the JSON payload's preview, escaped")
		require.Contains(t, body, "<code>ff0001</code>", "the binary payload's preview, in hex")
		require.Contains(t, body, "<code>k&lt;i&gt;</code>")
		noScript(t, body)
		require.NotContains(t, body, "<b>")
		require.NotContains(t, body, "<i>")
	})
	t.Run("live", func(t *testing.T) { testLive(t, e) })

	t.Run("refusals", func(t *testing.T) {
		_, body := do(t, e.h, "GET", parked, nil)
		form := forms(body)["resume"]
		code, _ := do(t, e.h, "GET", parked+"/resume", nil)
		require.Equal(t, http.StatusMethodNotAllowed, code)

		bad := url.Values{}
		for k, v := range form {
			bad[k] = v
		}
		bad.Set("csrf", strings.Repeat("0", 64))
		code, _ = do(t, e.h, "POST", parked+"/resume", bad)
		require.Equal(t, http.StatusForbidden, code)
		bad.Del("csrf")
		code, _ = do(t, e.h, "POST", parked+"/resume", bad)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", parked+"/skip", form) // resume's token
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", partPath(evilQueue, "2")+"/resume", form) // another partition's
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", partPath(evilQueue, "99")+"/resume", form)
		require.Equal(t, http.StatusNotFound, code)
		code, _ = do(t, e.h, "POST", partPath("nope", "1")+"/resume", form)
		require.Equal(t, http.StatusNotFound, code)
		code, _ = do(t, e.h, "POST", parked+"/frobnicate", form)
		require.Equal(t, http.StatusNotFound, code)

		stale := url.Values{}
		for k, v := range form {
			stale[k] = v
		}
		stale.Set("attempts", "1")
		code, body = do(t, e.h, "POST", parked+"/resume", stale)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "not done: partition changed since it was shown")

		ro, err := ui.New(e.admin, ui.ReadOnly(), ui.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		defer ro.Close()
		code, body = do(t, ro, "GET", parked, nil)
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, body, "<form")
		require.Contains(t, body, "read-only")
		code, _ = do(t, ro, "POST", parked+"/resume", form)
		require.Equal(t, http.StatusForbidden, code)

		s := e.state(evilQueue, 1)
		require.Equal(t, seqbox.StateParked, s.State, "no refusal acted")
		require.Equal(t, 2, s.Attempts)
		require.NotContains(t, e.logs.String(), `"outcome":"resumed`)
	})

	t.Run("resume", func(t *testing.T) {
		_, body := do(t, e.h, "GET", parked, nil)
		was := e.state(evilQueue, 1)
		code, body := do(t, e.h, "POST", parked+"/resume", forms(body)["resume"])
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "resumed")
		require.Contains(t, e.logs.String(), `"who":"alice","action":"resume","queue":"`)
		require.Contains(t, e.logs.String(), `"partition":"1","outcome":"resumed`)
		// The head is retried, fails twice more and parks again: a later park.
		e.waitState(evilQueue, 1, func(s seqbox.PartitionState) bool {
			return s.State == seqbox.StateParked && s.ParkedAt.After(was.ParkedAt)
		})
	})

	t.Run("retry", func(t *testing.T) {
		_, body := do(t, e.h, "GET", retrying, nil)
		f := forms(body)["retry"]
		was := e.state("slow", 0)
		code, body := do(t, e.h, "POST", retrying+"/retry", f)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "retried now")
		require.Contains(t, e.logs.String(), `"who":"alice","action":"retry","queue":"slow","partition":"0","outcome":"retried now"`)
		e.waitState("slow", 0, func(s seqbox.PartitionState) bool { return s.Attempts > was.Attempts })
		code, body = do(t, e.h, "POST", retrying+"/retry", f)
		require.Equal(t, http.StatusConflict, code, "the attempts shown are stale")
		require.Contains(t, body, "not done")
	})

	t.Run("basepath", func(t *testing.T) { testBasePath(t, e) })

	t.Run("skip", func(t *testing.T) {
		_, body := do(t, e.h, "GET", parked, nil)
		f := forms(body)["skip"]
		code, body := do(t, e.h, "POST", parked+"/skip", f)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "skipped: head seq 1 went to dead letters")
		require.Equal(t, seqbox.StateOK, e.state(evilQueue, 1).State)
		require.Contains(t, e.logs.String(), `"action":"skip"`)

		// A second operator, shown the same page, is told what happened.
		code, body = do(t, e.h, "POST", parked+"/skip", f)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "not done: partition changed since it was shown (shown: parked")
		require.Contains(t, e.logs.String(), `"action":"skip"`)
		require.Contains(t, e.logs.String(), `"outcome":"not done: partition changed since it was shown`)

		_, body = do(t, e.h, "GET", "/", nil)
		require.Contains(t, body, `<span class="dl">pending 1</span>`)
	})
}

// testBasePath: mounted under /seqbox/ with http.StripPrefix, every link
// and form of every screen resolves under /seqbox/ to a page that exists,
// and an action posted there acts.
func testBasePath(t *testing.T, e *env) {
	mux := http.NewServeMux()
	mux.Handle("/seqbox/", http.StripPrefix("/seqbox", e.h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(u string) string { return getOK(t, u) }
	linkRE := regexp.MustCompile(`(?:href|action)="([^"]*)"`)
	pages := []string{"/seqbox/", "/seqbox/queues/slow", "/seqbox/queues/slow?state=retrying", "/seqbox/queues/slow/partitions/0"}
	var actions []*url.URL
	for _, p := range pages {
		base, err := url.Parse(srv.URL + p)
		require.NoError(t, err)
		body := get(base.String())
		links := linkRE.FindAllStringSubmatch(body, -1)
		require.NotEmpty(t, links)
		for _, m := range links {
			ref, err := url.Parse(html.UnescapeString(m[1]))
			require.NoError(t, err)
			u := base.ResolveReference(ref)
			require.True(t, strings.HasPrefix(u.Path, "/seqbox/"), "%s on %s resolves to %s", m[1], p, u)
			if strings.HasPrefix(m[0], "action") {
				actions = append(actions, u)
				continue
			}
			get(u.String())
		}
	}
	require.NotEmpty(t, actions)
	_, body := do(t, e.h, "GET", "/queues/slow/partitions/0", nil)
	for _, u := range actions {
		if strings.HasSuffix(u.Path, "/retry") {
			require.Equal(t, "/seqbox/queues/slow/partitions/0/retry", u.Path)
			resp, err := http.PostForm(u.String(), forms(body)["retry"])
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			require.Contains(t, string(b), "retried now")
			// The outcome page, at the action's URL, links back under /seqbox/ too.
			for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
				ref, err := url.Parse(html.UnescapeString(m[1]))
				require.NoError(t, err)
				require.True(t, strings.HasPrefix(u.ResolveReference(ref).Path, "/seqbox/"), m[1])
			}
			require.Contains(t, string(b), `href="../../../../style.css"`)
			return
		}
	}
	t.Fatal("no retry form under /seqbox/")
}

// noScript: no untrusted text reached the page unescaped (the page's
// own script is <script src=…>).
func noScript(t *testing.T, body string) {
	t.Helper()
	require.NotContains(t, body, "<script>")
	require.NotContains(t, body, `alert("`)
}

// getOK GETs u over the network and returns its body, requiring a 200.
func getOK(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, u)
	return string(b)
}
