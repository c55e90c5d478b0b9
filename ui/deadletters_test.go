package ui_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/ui"
)

// deadLettering is the "dead" queue's handler (one attempt, then a dead
// letter): it fails a message whose header "fail" is set, with that
// text, unless it is a replay, which it takes.
func deadLettering(_ context.Context, d processor.Delivery) error {
	if msg := d.Headers["fail"]; msg != "" && d.Headers[deadletter.ReplayOfHeader] == "" {
		return errors.New(msg)
	}
	return nil
}

// Hostile text in the dead letters: payload, error, headers.
const (
	jsonPayload = `{"order":42,"note":"<script>alert(\"p\")</script>"}`
	jsonError   = `timeout: upstream <script>alert("e")</script>` + "\nsecond line"
	textPayload = `plain "text" <b>bold</b> javascript:alert("t")`
	textError   = `refused by "peer"`
	evilHeader  = `javascript:alert("h")`
)

var (
	binaryPayload = []byte{0x00, 0x01, 0xff, 0xfe, '<'}
	rowRE         = regexp.MustCompile(`aria-label="Dead letter (\d+)"`)
	matchRE       = regexp.MustCompile(`<strong>(\d+)</strong> `)
	hrefRE        = regexp.MustCompile(`href="([^"]*)"`)
)

// deadQueue is the queue of the dead-letter tests.
var deadQueue = queueDef{"dead", 4, processor.Leased(deadLettering), []processor.QueueOption{processor.MaxAttempts(1)}}

func TestDeadLetters(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			testDeadLetters(t, newEnv(t, o.Open, deadQueue))
		})
	}
}

func (e *env) send(m outbox.Message) {
	e.t.Helper()
	_, err := e.ob.Enqueue(e.ctx, e.db, "dead", m)
	require.NoError(e.t, err)
}

func (e *env) tally(f deadletter.Filter) deadletter.Tally {
	e.t.Helper()
	t, err := e.admin.DeadLetters().Tally(e.ctx, f)
	require.NoError(e.t, err)
	return t
}

// waitTally waits for observable progress: the letters a filter matches
// reaching a state.
func (e *env) waitTally(f deadletter.Filter, cond func(deadletter.Tally) bool) deadletter.Tally {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		t := e.tally(f)
		if cond(t) {
			return t
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for dead letters %+v; last %+v", f, t)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// only returns the one letter a filter matches.
func (e *env) only(f deadletter.Filter) deadletter.Letter {
	e.t.Helper()
	p, err := e.admin.DeadLetters().List(e.ctx, f, 0, 2)
	require.NoError(e.t, err)
	require.Len(e.t, p.Letters, 1, "%+v", f)
	return p.Letters[0]
}

func clone(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// listed reads a list page: the count shown and the ids of its rows.
func listed(t *testing.T, body string) (int, []int64) {
	t.Helper()
	m := matchRE.FindStringSubmatch(body)
	require.NotNil(t, m, "no count on the page")
	n, _ := strconv.Atoi(m[1])
	var ids []int64
	for _, r := range rowRE.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(r[1], 10, 64)
		ids = append(ids, id)
	}
	return n, ids
}

// bulkRE is a bulk action's button: a GET form to its confirmation.
var bulkRE = regexp.MustCompile(`(?s)<form method="get" action="([^"]*)">([^<]*(?:<input[^>]*>\s*)*)<button type="submit">([^<]*)</button></form>`)

// bulk finds the confirmation URL of the bulk button labelled label.
func bulk(t *testing.T, body, label string) string {
	t.Helper()
	for _, m := range bulkRE.FindAllStringSubmatch(body, -1) {
		if m[3] != label {
			continue
		}
		v := url.Values{}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			v.Add(in[1], html.UnescapeString(in[2]))
		}
		return html.UnescapeString(m[1]) + "?" + v.Encode()
	}
	t.Fatalf("no button %q", label)
	return ""
}

// link finds the href of the link with text label, as a path for do.
func link(t *testing.T, body, label string) string {
	t.Helper()
	re := regexp.MustCompile(`<a[^>]* href="([^"]*)"[^>]*>` + regexp.QuoteMeta(label) + `</a>`)
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, "no link %q", label)
	return html.UnescapeString(m[1])
}

// abs resolves a page's relative link against the page's path.
func abs(t *testing.T, page, ref string) string {
	t.Helper()
	base, err := url.Parse(page)
	require.NoError(t, err)
	r, err := url.Parse(ref)
	require.NoError(t, err)
	return base.ResolveReference(r).String()
}

// noHostile: no untrusted text reached the page as markup or as a link.
func noHostile(t *testing.T, body string) {
	t.Helper()
	noScript(t, body)
	require.NotRegexp(t, `(?i)(href|action|src)="\s*javascript:`, body)
	require.NotContains(t, body, "<b>bold")
}

func testDeadLetters(t *testing.T, e *env) {
	t0 := time.Now().UTC()
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k<%d>", i); outbox.PartitionForKey(k, 4) == 0 {
			key = k
		}
	}
	e.send(outbox.Message{Key: key, PayloadType: "order.created", Payload: []byte(jsonPayload),
		Headers: map[string]string{"tenant": "42", "fail": jsonError}})
	e.send(outbox.Message{Partition: 1, PayloadType: "note", Payload: []byte(textPayload),
		Headers: map[string]string{"tenant": "7", "evil": evilHeader, "fail": textError}})
	e.send(outbox.Message{Partition: 1, PayloadType: "blob", Payload: binaryPayload,
		Headers: map[string]string{"tenant": "42", "fail": "Binary mismatch"}})
	for i := range 60 {
		e.send(outbox.Message{Partition: 2, PayloadType: "bulk", Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`),
			Headers: map[string]string{"batch": "b1", "fail": "bulk failure"}})
	}
	dead := deadletter.Filter{Queue: "dead"}
	e.waitTally(dead, func(t deadletter.Tally) bool { return t.ByStatus[deadletter.StatusPending] == 63 })
	t1 := time.Now().UTC()
	jsonL := e.only(deadletter.Filter{PayloadType: "order.created"})
	textL := e.only(deadletter.Filter{PayloadType: "note"})
	binL := e.only(deadletter.Filter{PayloadType: "blob"})

	t.Run("list", func(t *testing.T) {
		code, body := do(t, e.h, "GET", "/deadletters", nil)
		require.Equal(t, http.StatusOK, code, body)
		n, ids := listed(t, body)
		require.Equal(t, 63, n)
		require.Len(t, ids, 50)
		require.Contains(t, body, `pending letters match`)
		require.Contains(t, body, `>pending 63</a>`)
		require.Contains(t, body, `href="./queues/dead/partitions/2"`)
		require.Contains(t, body, `name="queue"`)
		require.Contains(t, body, `<button type="submit">Filter</button>`)
		require.Contains(t, bulk(t, body, "Replay all 63 matching"), "deadletters/confirm?action=replay&status=pending")
		require.NotContains(t, body, "First page")
		noHostile(t, body)
		next := link(t, body, "Next page")
		require.Contains(t, next, "after="+strconv.FormatInt(ids[49], 10))

		code, body2 := do(t, e.h, "GET", abs(t, "/deadletters", next), nil)
		require.Equal(t, http.StatusOK, code)
		n, ids2 := listed(t, body2)
		require.Equal(t, 63, n, "the count is the filter's, not the page's")
		require.Len(t, ids2, 13)
		require.Greater(t, ids2[0], ids[49], "keyset: the next page starts after the last id shown")
		require.NotContains(t, body2, "Next page")
		code, body3 := do(t, e.h, "GET", abs(t, "/deadletters", link(t, body2, "First page")), nil)
		require.Equal(t, http.StatusOK, code)
		_, ids3 := listed(t, body3)
		require.Equal(t, ids, ids3)

		// Live updates: the counts, buttons and rows, without the layout.
		w := get(t, e.h, "/deadletters", true)
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Body.String(), `<div data-live="results">`)
		require.Contains(t, w.Body.String(), `>pending 63</a>`)
		require.NotContains(t, w.Body.String(), "<html")
		w = get(t, e.h, "/deadletters/"+strconv.FormatInt(ids[0], 10), true)
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Body.String(), `<dl class="state" data-live="state">`)

		// The first error line only, escaped, in the list.
		code, body = do(t, e.h, "GET", "/deadletters?type=order.created", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `timeout: upstream &lt;script&gt;alert(&#34;e&#34;)&lt;/script&gt; …</code>`)
		require.NotContains(t, body, "second line")
	})

	t.Run("filters", func(t *testing.T) {
		when := func(tm time.Time) string { return tm.Format("2006-01-02T15:04:05") }
		for _, c := range []struct {
			query string
			n     int
		}{
			{"queue=dead", 63},
			{"queue=slow", 0},
			{"queue=dead&partition=2", 60},
			{"queue=dead&partition=1", 2},
			{"type=blob", 1},
			{"error=" + url.QueryEscape(`upstream <script>`), 1},
			{"error=Upstream", 0}, // case-sensitive
			{"error=" + url.QueryEscape(textError), 1},
			{"error=failure", 60},
			{"header=" + url.QueryEscape("tenant=42"), 2},
			{"header=" + url.QueryEscape(" tenant = 42 \r\nfail=Binary mismatch\n"), 1},
			{"header=tenant%3D7&header=" + url.QueryEscape("evil="+evilHeader), 1},
			{"header=tenant%3D8", 0},
			{"status=any", 63},
			{"status=resolved", 0},
			{"from=" + when(t0.Add(-time.Minute)) + "&to=" + when(t1.Add(time.Minute)), 63},
			{"from=" + when(t1.Add(time.Minute)), 0},
			{"to=" + when(t0.Add(-time.Minute)), 0},
			{"queue=dead&type=bulk&header=batch%3Db1&error=bulk&status=pending", 60},
		} {
			code, body := do(t, e.h, "GET", "/deadletters?"+c.query, nil)
			require.Equal(t, http.StatusOK, code, c.query)
			n, ids := listed(t, body)
			require.Equal(t, c.n, n, c.query)
			require.Len(t, ids, min(c.n, 50), c.query)
			noHostile(t, body)
		}
		// The form shows the filter it applied.
		_, body := do(t, e.h, "GET", "/deadletters?queue=dead&partition=1&status=any&type=blob&header=tenant%3D42", nil)
		require.Contains(t, body, `<option value="dead" selected>dead</option>`)
		require.Contains(t, body, `<option value="any" selected>any</option>`)
		require.Contains(t, body, `name="partition" inputmode="numeric" size="6" value="1"`)
		require.Contains(t, body, `>tenant=42</textarea>`)
		require.Contains(t, body, "Replay all 1 matching", "the pending one among them")
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct{ query, says string }{
			{"partition=x&queue=dead&error=keep+me", `partition &#34;x&#34; is not a partition number`},
			{"partition=1", "partitions need a queue"},
			{"from=yesterday", `from: &#34;yesterday&#34; is not a time`},
			{"to=2025-13-01T00:00", "to: "},
			{"from=2025-02-01T00:00&to=2025-01-01T00:00", "is not before"},
			{"status=bogus", "is not one of pending, replayed"},
			{"header=novalue", `header &#34;novalue&#34; is not name=value`},
			{"header=a%3D1%0Aa%3D2", `header &#34;a&#34; is given twice`},
			{"after=-1", `after &#34;-1&#34; is not a letter id`},
			{"error=two%0Alines", "must be one line"},
			{"error=" + url.QueryEscape(`<script>alert("x")</script>`) + "&header=" + url.QueryEscape("evil="+evilHeader) + "&partition=bad", "is not a partition number"},
		} {
			code, body := do(t, e.h, "GET", "/deadletters?"+c.query, nil)
			require.Equal(t, http.StatusBadRequest, code, c.query)
			require.Contains(t, body, c.says, c.query)
			require.Contains(t, body, `role="alert"`)
			require.NotContains(t, body, "<table", "no results under a bad filter")
			noHostile(t, body)
		}
		_, body := do(t, e.h, "GET", "/deadletters?partition=x&queue=dead&error=keep+me&header=a%3Db", nil)
		require.Contains(t, body, `value="keep me"`, "the form keeps what was typed")
		require.Contains(t, body, `value="x"`)
		require.Contains(t, body, `>a=b</textarea>`)
		require.Contains(t, body, `<option value="dead" selected>`)
	})

	t.Run("detail", func(t *testing.T) {
		code, body := do(t, e.h, "GET", "/deadletters/"+strconv.FormatInt(jsonL.ID, 10), nil)
		require.Equal(t, http.StatusOK, code, body)
		noHostile(t, body)
		require.Contains(t, body, `class="payload payload-json">{
  &#34;order&#34;: 42,
  &#34;note&#34;: &#34;&lt;script&gt;alert(\&#34;p\&#34;)&lt;/script&gt;&#34;
}</pre>`)
		require.Contains(t, body, `<pre class="err">after 1 attempts: timeout: upstream &lt;script&gt;alert(&#34;e&#34;)&lt;/script&gt;`+"\nsecond line</pre>")
		require.Contains(t, body, html.EscapeString(key))
		require.Contains(t, body, jsonL.MessageID.String())
		require.Contains(t, body, `href="../queues/dead/partitions/0"`)
		require.Contains(t, body, `<code>tenant</code></th><td><code>42</code>`)
		f := forms(body)
		require.Contains(t, f, "replay")
		require.Contains(t, f, "resolve")
		require.Contains(t, f, "discard")
		require.Contains(t, body, `<label for="a-resolve-note">note</label>`)

		code, body = do(t, e.h, "GET", "/deadletters/"+strconv.FormatInt(textL.ID, 10), nil)
		require.Equal(t, http.StatusOK, code)
		noHostile(t, body)
		require.Contains(t, body, `class="payload payload-text">plain &#34;text&#34; &lt;b&gt;bold&lt;/b&gt; javascript:alert(&#34;t&#34;)</pre>`)
		require.Contains(t, body, `<code>evil</code></th><td><code>javascript:alert(&#34;h&#34;)</code>`)

		code, body = do(t, e.h, "GET", "/deadletters/"+strconv.FormatInt(binL.ID, 10), nil)
		require.Equal(t, http.StatusOK, code)
		noHostile(t, body)
		require.Contains(t, body, `class="payload payload-binary">00000000  00 01 ff fe 3c`)
		require.Contains(t, body, `binary, 5 bytes`)

		// A message id, as logs name it, leads to the letter's page.
		r := httptest.NewRequest("GET", "/deadletters/"+binL.MessageID.String(), nil)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		require.Equal(t, http.StatusSeeOther, w.Code)
		require.Equal(t, strconv.FormatInt(binL.ID, 10), w.Header().Get("Location"))

		for _, p := range []string{"/deadletters/999999999", "/deadletters/0", "/deadletters/-1", "/deadletters/x",
			"/deadletters/00000000-0000-7000-8000-000000000000", "/deadletters/" + url.PathEscape(`<script>alert("x")</script>`)} {
			code, body = do(t, e.h, "GET", p, nil)
			require.Equal(t, http.StatusNotFound, code, p)
			noHostile(t, body)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		textPath := "/deadletters/" + strconv.FormatInt(textL.ID, 10)
		binPath := "/deadletters/" + strconv.FormatInt(binL.ID, 10)
		_, body := do(t, e.h, "GET", textPath, nil)
		resolve := forms(body)["resolve"]
		resolve.Set("note", "x")
		bad := clone(resolve)
		bad.Set("csrf", strings.Repeat("0", 64))
		code, _ := do(t, e.h, "POST", textPath+"/resolve", bad)
		require.Equal(t, http.StatusForbidden, code)
		bad.Del("csrf")
		code, _ = do(t, e.h, "POST", textPath+"/resolve", bad)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", binPath+"/resolve", resolve) // another letter's token
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", textPath+"/discard", resolve) // another action's token
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", textPath+"/frobnicate", resolve)
		require.Equal(t, http.StatusNotFound, code)
		code, _ = do(t, e.h, "GET", textPath+"/resolve", nil)
		require.Equal(t, http.StatusMethodNotAllowed, code, "an action is a POST")

		_, body = do(t, e.h, "GET", "/deadletters/confirm?action=discard&type=note", nil)
		discard := forms(body)["discard"]
		require.Equal(t, "1", discard.Get("count"))
		bad = clone(discard)
		bad.Set("csrf", "nope")
		code, _ = do(t, e.h, "POST", "/deadletters/discard", bad)
		require.Equal(t, http.StatusForbidden, code)
		bad.Del("csrf")
		code, _ = do(t, e.h, "POST", "/deadletters/discard", bad)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", "/deadletters/replay", discard) // discard's token
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, e.h, "POST", "/deadletters/frobnicate", discard)
		require.Equal(t, http.StatusNotFound, code)
		for _, change := range []func(url.Values){
			func(v url.Values) { v.Del("count") },
			func(v url.Values) { v.Set("count", "0") },
			func(v url.Values) { v.Del("max_id") },
			func(v url.Values) { v.Set("status", "resolved") },
			func(v url.Values) { v.Set("partition", "1") }, // without a queue
		} {
			v := clone(discard)
			change(v)
			code, _ = do(t, e.h, "POST", "/deadletters/discard", v)
			require.Equal(t, http.StatusBadRequest, code, v.Encode())
		}
		for _, q := range []string{"action=frob&type=note", "type=note", "action=replay&status=resolved", "action=replay&from=x"} {
			code, body = do(t, e.h, "GET", "/deadletters/confirm?"+q, nil)
			require.Equal(t, http.StatusBadRequest, code, q)
			noHostile(t, body)
		}

		ro, err := ui.New(e.admin, ui.ReadOnly(), ui.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		defer ro.Close()
		code, body = do(t, ro, "GET", "/deadletters", nil)
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, body, "Replay all")
		require.NotContains(t, body, "/confirm")
		require.Contains(t, body, "read-only")
		code, body = do(t, ro, "GET", textPath, nil)
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, body, `<form method="post"`)
		code, _ = do(t, ro, "GET", "/deadletters/confirm?action=discard&type=note", nil)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, ro, "POST", "/deadletters/discard", discard)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = do(t, ro, "POST", textPath+"/resolve", resolve)
		require.Equal(t, http.StatusForbidden, code)

		tl := e.tally(dead)
		require.Equal(t, int64(63), tl.ByStatus[deadletter.StatusPending], "no refusal acted")
		require.Equal(t, int64(63), tl.Total)
		require.Contains(t, e.logs.String(), `"outcome":"refused: bad CSRF token"`)
	})

	t.Run("resolve race", func(t *testing.T) {
		path := "/deadletters/" + strconv.FormatInt(textL.ID, 10)
		_, body := do(t, e.h, "GET", path, nil)
		f := forms(body)
		var wg sync.WaitGroup
		codes, bodies := make([]int, 2), make([]string, 2)
		for i, note := range []string{"first <i>", "second <i>"} {
			v := clone(f["resolve"])
			v.Set("note", note)
			wg.Go(func() { codes[i], bodies[i] = do(t, e.h, "POST", path+"/resolve", v) })
		}
		wg.Wait()
		require.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, codes, "%v", bodies)
		won, lost := 0, 1
		if codes[0] == http.StatusConflict {
			won, lost = 1, 0
		}
		require.Contains(t, bodies[won], `role="status" class="outcome">resolved</p>`)
		require.Contains(t, bodies[lost], "not done: another operator acted first; this letter is resolved now")
		require.Contains(t, bodies[lost], `<span class="state dl-resolved">resolved</span>`, "the loser sees the letter as it is now")
		require.Contains(t, bodies[lost], "&lt;i&gt;</pre>", "and the winner's note")
		require.NotContains(t, bodies[lost], `<form method="post"`)
		noHostile(t, bodies[lost])
		l := e.only(deadletter.Filter{PayloadType: "note"})
		require.Equal(t, deadletter.StatusResolved, l.Status)
		require.Equal(t, []string{"first <i>", "second <i>"}[won], l.Note)

		// A stale page's other action: refused the same way.
		code, body := do(t, e.h, "POST", path+"/discard", f["discard"])
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "this letter is resolved now, which discard does not apply to")
		require.Contains(t, e.logs.String(), `"who":"alice","action":"resolve","letter":"`+strconv.FormatInt(textL.ID, 10)+`","outcome":"resolved"`)
	})

	t.Run("bulk replay", func(t *testing.T) {
		code, body := do(t, e.h, "GET", "/deadletters?type=bulk", nil)
		require.Equal(t, http.StatusOK, code)
		confirm := bulk(t, body, "Replay all 60 matching")
		require.Contains(t, confirm, "action=replay")
		code, body = do(t, e.h, "GET", abs(t, "/deadletters", confirm), nil)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `The pending letters of every queue, payload type &#34;bulk&#34;: <strong>60</strong>`)
		require.Len(t, rowLinks(body), 5, "a sample of the first letters")
		require.Contains(t, body, "Confirm replay of 60 letters</button>")
		f := forms(body)["replay"]
		require.Equal(t, "60", f.Get("count"))
		require.Equal(t, "pending", f.Get("status"))

		code, body = do(t, e.h, "POST", "/deadletters/replay", f)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `<p role="status" class="outcome">Replayed 60 letters</p>`)
		require.Contains(t, e.logs.String(), `"who":"alice","action":"replay","filter":"status=pending&type=bulk","count":60,"outcome":"Replayed 60 letters"`)
		// Delivered: each copy's ack resolves its letter.
		e.waitTally(deadletter.Filter{PayloadType: "bulk"}, func(t deadletter.Tally) bool {
			return t.ByStatus[deadletter.StatusResolved] == 60
		})
		_, body = do(t, e.h, "GET", "/deadletters?type=bulk", nil)
		require.NotContains(t, body, "Replay all")
	})

	t.Run("stale count", func(t *testing.T) {
		tenant42 := deadletter.Filter{Headers: map[string]string{"tenant": "42"}, Statuses: []deadletter.Status{deadletter.StatusPending}}
		_, body := do(t, e.h, "GET", "/deadletters/confirm?action=discard&header=tenant%3D42", nil)
		f := forms(body)["discard"]
		require.Equal(t, "2", f.Get("count"))
		f.Set("reason", "gone")
		v := clone(f)
		v.Set("count", "3")
		code, body := do(t, e.h, "POST", "/deadletters/discard", v)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "not done: 3 were shown, 2 match now")
		require.Equal(t, int64(2), e.tally(tenant42).Total, "nothing changed")

		// Another operator acts on one of them: the count shown is stale.
		path := "/deadletters/" + strconv.FormatInt(binL.ID, 10)
		_, one := do(t, e.h, "GET", path, nil)
		code, _ = do(t, e.h, "POST", path+"/resolve", forms(one)["resolve"])
		require.Equal(t, http.StatusOK, code)
		code, body = do(t, e.h, "POST", "/deadletters/discard", f)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "not done: 2 were shown, 1 match now")
		require.Equal(t, int64(1), e.tally(tenant42).Total, "nothing changed")
		require.Contains(t, e.logs.String(), `"action":"discard","filter":"header=tenant%3D42&status=pending","count":2,"outcome":"not done: 2 were shown, 1 match now"`)
		code, body = do(t, e.h, "GET", abs(t, "/deadletters/discard", link(t, body, "Count again and confirm")), nil)
		require.Equal(t, http.StatusOK, code)
		f = forms(body)["discard"]
		require.Equal(t, "1", f.Get("count"))

		// A letter dead-lettered after the count is left out: the action
		// acts on what was counted.
		e.send(outbox.Message{Partition: 3, PayloadType: "late", Payload: []byte("late"), Headers: map[string]string{"tenant": "42", "fail": "late"}})
		e.waitTally(tenant42, func(t deadletter.Tally) bool { return t.Total == 2 })
		code, body = do(t, e.h, "POST", "/deadletters/discard", f)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "Discarded 1 letters")
		require.Equal(t, deadletter.StatusDiscarded, e.only(deadletter.Filter{PayloadType: "order.created"}).Status)
		require.Equal(t, deadletter.StatusPending, e.only(deadletter.Filter{PayloadType: "late"}).Status)
	})

	t.Run("concurrent confirms", func(t *testing.T) {
		for i := range 5 {
			e.send(outbox.Message{Partition: 3, PayloadType: "race", Payload: []byte{byte(i)}, Headers: map[string]string{"batch": "b2", "fail": "race"}})
		}
		race := deadletter.Filter{PayloadType: "race"}
		e.waitTally(race, func(t deadletter.Tally) bool { return t.ByStatus[deadletter.StatusPending] == 5 })
		_, body := do(t, e.h, "GET", "/deadletters/confirm?action=resolve&header=batch%3Db2", nil)
		f := forms(body)["resolve"]
		require.Contains(t, body, "Confirm resolve of 5 letters")
		var wg sync.WaitGroup
		codes, bodies := make([]int, 2), make([]string, 2)
		for i := range 2 {
			v := clone(f)
			v.Set("note", "tab "+strconv.Itoa(i))
			wg.Go(func() { codes[i], bodies[i] = do(t, e.h, "POST", "/deadletters/resolve", v) })
		}
		wg.Wait()
		require.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, codes, "%v", bodies)
		for i := range 2 {
			if codes[i] == http.StatusOK {
				require.Contains(t, bodies[i], "Resolved 5 letters")
			} else {
				require.Contains(t, bodies[i], "not done: 5 were shown, 0 match now")
			}
		}
		tl := e.tally(race)
		require.Equal(t, int64(5), tl.ByStatus[deadletter.StatusResolved])
		require.Equal(t, int64(5), tl.Total)
	})

	t.Run("escaping", func(t *testing.T) {
		q := "error=" + url.QueryEscape(`<script>alert("x")</script>`) + "&type=" + url.QueryEscape(`"><script>alert("t")</script>`) +
			"&header=" + url.QueryEscape("evil="+evilHeader) + "&status=any"
		code, body := do(t, e.h, "GET", "/deadletters?"+q, nil)
		require.Equal(t, http.StatusOK, code)
		noHostile(t, body)
		require.Contains(t, body, `value="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"`)
		code, body = do(t, e.h, "GET", "/deadletters/confirm?action=replay&"+strings.Replace(q, "status=any", "status=pending", 1), nil)
		require.Equal(t, http.StatusOK, code)
		noHostile(t, body)
		require.Contains(t, body, "nothing to replay")
		code, body = do(t, e.h, "GET", "/deadletters?header=evil%3D"+url.QueryEscape(evilHeader)+"&status=any", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, 1, strings.Count(body, `aria-label="Dead letter `))
		noHostile(t, body)
	})

	t.Run("basepath", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("/seqbox/", http.StripPrefix("/seqbox", e.h))
		srv := httptest.NewServer(mux)
		defer srv.Close()
		id := strconv.FormatInt(jsonL.ID, 10)
		seen := map[string]bool{}
		for _, p := range []string{"/seqbox/deadletters", "/seqbox/deadletters?status=any", "/seqbox/deadletters/" + id,
			"/seqbox/deadletters/confirm?action=replay&type=late", "/seqbox/purge", "/seqbox/purge?queue=dead&header=a%3Db"} {
			links := checkLinks(t, srv.URL+p, seen)
			require.NotEmpty(t, links, p)
		}
	})
}

// rowLinks are a page's links to dead letters.
func rowLinks(body string) []string {
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		if regexp.MustCompile(`deadletters/\d+$`).MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// checkLinks: every link and form of a page resolves under /seqbox/,
// and every link is a page that exists (each fetched once: seen).
func checkLinks(t *testing.T, page string, seen map[string]bool) []string {
	t.Helper()
	base, err := url.Parse(page)
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile(`(href|action)="([^"]*)"`).FindAllStringSubmatch(getOK(t, page), -1) {
		ref, err := url.Parse(html.UnescapeString(m[2]))
		require.NoError(t, err)
		u := base.ResolveReference(ref)
		require.True(t, strings.HasPrefix(u.Path, "/seqbox/"), "%s on %s resolves to %s", m[2], page, u)
		if m[1] == "href" && !seen[u.String()] {
			seen[u.String()] = true
			getOK(t, u.String())
		}
		out = append(out, u.String())
	}
	return out
}
