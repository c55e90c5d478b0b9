package ui_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/ui"
)

func TestPurge(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			testPurge(t, newEnv(t, o.Open, queueDef{"hold", 2, nil, nil})) // no process consumes it
		})
	}
}

// hold enqueues to the "hold" queue, which no process consumes, and
// waits for the sequencer to have moved it to outgoing: a preview
// counts incoming and outgoing in two statements, and a message moved
// between them would be counted twice.
func (e *env) hold(partition int, headers map[string]string) {
	e.t.Helper()
	_, err := e.ob.Enqueue(e.ctx, e.db, "hold", outbox.Message{Partition: partition, PayloadType: "t", Payload: []byte("x"), Headers: headers})
	require.NoError(e.t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := e.admin.Stats(e.ctx)
		require.NoError(e.t, err)
		incoming := int64(0)
		for _, p := range st.Partitions {
			if p.Queue == "hold" {
				incoming += p.Incoming
			}
		}
		if incoming == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for hold's messages to be sequenced; %d incoming", incoming)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// matching is what a purge of queue hold by headers would remove now.
func (e *env) matching(headers map[string]string) int {
	e.t.Helper()
	r, err := e.admin.PreviewPurge(e.ctx, "hold", outbox.PurgeFilter{Headers: headers})
	require.NoError(e.t, err)
	return r.Incoming + r.Outgoing + r.InFlight
}

func testPurge(t *testing.T, e *env) {
	nine, eight := map[string]string{"tenant": "9"}, map[string]string{"tenant": "8"}
	e.hold(0, nine)
	e.hold(0, nine)
	e.hold(1, nine)
	e.hold(0, eight)
	e.hold(1, map[string]string{"tenant": "8", "evil": `<script>alert("v")</script>`})
	preview := "/purge?queue=hold&header=tenant%3D9"

	t.Run("form", func(t *testing.T) {
		code, body := do(t, e.h, "GET", "/purge", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `<option value="hold">hold</option>`)
		require.Contains(t, body, `<button type="submit">Preview</button>`)
		require.Contains(t, body, `<label for="p-header">`)
		require.NotContains(t, body, `<form method="post"`)
		require.NotContains(t, body, `role="alert"`)
	})

	t.Run("preview", func(t *testing.T) {
		code, body := do(t, e.h, "GET", preview, nil)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "Preview: 3 messages of hold would be purged now")
		require.Contains(t, body, `<option value="hold" selected>hold</option>`)
		require.Contains(t, body, `>tenant=9</textarea>`)
		require.Regexp(t, `partitions/0">0</a></th><td class="num">\d</td><td class="num">\d</td>`, body)
		require.Contains(t, body, `href="./queues/hold/partitions/1"`)
		require.Contains(t, body, "Purge 3 messages</button>")
		f := forms(body)["purge"]
		require.Equal(t, "3", f.Get("count"))
		require.Equal(t, "hold", f.Get("queue"))
		require.Equal(t, []string{"tenant=9"}, f["header"])
		noHostile(t, body)

		code, body = do(t, e.h, "GET", "/purge?queue=hold&header="+url.QueryEscape("tenant=8\nevil=<script>alert(\"v\")</script>"), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Purge 1 messages</button>")
		noHostile(t, body)
		code, body = do(t, e.h, "GET", "/purge?queue=hold&header=tenant%3D7", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Nothing to purge")
		require.NotContains(t, body, `<form method="post"`)
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct{ query, says string }{
			{"queue=hold", "give at least one header"},
			{"queue=hold&header=", "give at least one header"},
			{"header=tenant%3D9", "choose a queue"},
			{"queue=nope&header=tenant%3D9", `no queue &#34;nope&#34;`},
			{"queue=hold&header=novalue", `header &#34;novalue&#34; is not name=value`},
			{"queue=" + `%3Cscript%3Ealert(%22q%22)%3C%2Fscript%3E` + "&header=a%3Db", "no queue"},
		} {
			code, body := do(t, e.h, "GET", "/purge?"+c.query, nil)
			require.Equal(t, http.StatusBadRequest, code, c.query)
			require.Contains(t, body, c.says, c.query)
			require.NotContains(t, body, `<form method="post"`)
			noHostile(t, body)
		}
		_, body := do(t, e.h, "GET", "/purge?queue=hold&header=novalue", nil)
		require.Contains(t, body, `>novalue</textarea>`, "the form keeps what was typed")
	})

	t.Run("refusals", func(t *testing.T) {
		_, body := do(t, e.h, "GET", preview, nil)
		f := forms(body)["purge"]
		bad := clone(f)
		bad.Set("csrf", strings.Repeat("0", 64))
		code, _ := do(t, e.h, "POST", "/purge", bad)
		require.Equal(t, http.StatusForbidden, code)
		bad.Del("csrf")
		code, _ = do(t, e.h, "POST", "/purge", bad)
		require.Equal(t, http.StatusForbidden, code)
		other := clone(f)
		other.Set("queue", "dead") // the token names the queue
		code, _ = do(t, e.h, "POST", "/purge", other)
		require.Equal(t, http.StatusForbidden, code)
		for _, change := range []func(v map[string][]string){
			func(v map[string][]string) { delete(v, "count") },
			func(v map[string][]string) { v["count"] = []string{"0"} },
			func(v map[string][]string) { delete(v, "header") },
		} {
			v := clone(f)
			change(v)
			code, _ = do(t, e.h, "POST", "/purge", v)
			require.Equal(t, http.StatusBadRequest, code, v.Encode())
		}

		ro, err := ui.New(e.admin, ui.ReadOnly(), ui.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		defer ro.Close()
		code, body = do(t, ro, "GET", preview, nil)
		require.Equal(t, http.StatusOK, code, "a preview changes nothing: read-only shows it")
		require.Contains(t, body, "Preview: 3 messages")
		require.NotContains(t, body, `<form method="post"`)
		code, _ = do(t, ro, "POST", "/purge", f)
		require.Equal(t, http.StatusForbidden, code)
		require.Equal(t, 3, e.matching(nine), "no refusal purged")
	})

	t.Run("stale preview", func(t *testing.T) {
		_, body := do(t, e.h, "GET", preview, nil)
		f := forms(body)["purge"]
		e.hold(1, nine)
		code, body := do(t, e.h, "POST", "/purge", f)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "not done: changed since the preview, which counted 3: now 4")
		require.Contains(t, body, "Purge 4 messages</button>", "a fresh preview")
		require.Equal(t, 4, e.matching(nine), "nothing purged")
		require.Contains(t, e.logs.String(), `"action":"purge","queue":"hold","filter":"tenant=9","count":3,"outcome":"not done: changed`)

		code, body = do(t, e.h, "POST", "/purge", forms(body)["purge"])
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `<p role="status" class="outcome">Purged 4 messages</p>`)
		require.NotContains(t, body, `<form method="post"`)
		require.Contains(t, e.logs.String(), `"who":"alice","action":"purge","queue":"hold","filter":"tenant=9","count":4,"outcome":"Purged 4 messages"`)
		require.Equal(t, 0, e.matching(nine))
		require.Equal(t, 2, e.matching(eight), "other tenants' messages stay")
		_, body = do(t, e.h, "GET", preview, nil)
		require.Contains(t, body, "Nothing to purge")
	})
}
