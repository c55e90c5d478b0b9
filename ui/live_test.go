package ui_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/ui"
)

const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'"

// get does a GET, live (X-Seqbox-Live: 1) or not.
func get(t *testing.T, h http.Handler, path string, live bool) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	if live {
		r.Header.Set("X-Seqbox-Live", "1")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// region is the element carrying data-live="name" in body, up to its
// closing tag.
func region(t *testing.T, body, tag, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<` + tag + `[^>]* data-live="` + name + `"[^>]*>.*?</` + tag + `>`).FindString(body)
	require.NotEmpty(t, m, "no %s data-live=%q in %s", tag, name, body)
	return m
}

// testLive: the live fragments, the script and its CSP, and the charts
// once the sampler has samples, on one database.
func testLive(t *testing.T, e *env) {
	evilPath := "/queues/" + url.PathEscape(evilQueue)
	parked := partPath(evilQueue, "1")

	t.Run("headers", func(t *testing.T) {
		w := get(t, e.h, "/", false)
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, csp, w.Header().Get("Content-Security-Policy"))
		require.Contains(t, w.Header().Values("Vary"), "X-Seqbox-Live")
		body := w.Body.String()
		require.Contains(t, body, `<script src="./live.js" defer></script>`)
		require.Contains(t, body, `<body data-refresh="2">`)
		require.Contains(t, body, `<a class="skip" href="#content">`)
		require.Contains(t, body, `<main id="content"`)
		require.Contains(t, body, `role="status" aria-live="polite"`)

		w = get(t, e.h, "/live.js", false)
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, "text/javascript; charset=utf-8", w.Header().Get("Content-Type"))
		require.Contains(t, w.Body.String(), `"X-Seqbox-Live": "1"`)
		require.Equal(t, csp, w.Header().Get("Content-Security-Policy"))
	})

	t.Run("fragments", func(t *testing.T) {
		for _, tc := range []struct {
			path    string
			regions [][2]string // tag, name
		}{
			{"/", [][2]string{{"div", "queues"}, {"div", "failing"}, {"section", "charts"}}},
			{evilPath, [][2]string{{"nav", "counts"}, {"div", "grid"}}},
			{evilPath + "?state=parked", [][2]string{{"nav", "counts"}, {"div", "grid"}}},
			{parked, [][2]string{{"dl", "state"}}},
		} {
			full := get(t, e.h, tc.path, false)
			w := get(t, e.h, tc.path, true)
			require.Equal(t, http.StatusOK, w.Code, tc.path)
			require.Contains(t, w.Header().Values("Vary"), "X-Seqbox-Live")
			require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
			body := w.Body.String()
			for _, not := range []string{"<html", "<head", "<header", "<body", "<main", "<script"} {
				require.NotContains(t, body, not, tc.path)
			}
			require.Contains(t, full.Body.String(), "<html")
			for _, r := range tc.regions {
				got := region(t, body, r[0], r[1])
				require.NotContains(t, got, "<form", "%s: forms stay outside live regions", tc.path)
				require.Contains(t, full.Body.String(), `data-live="`+r[1]+`"`, "%s: the page has the region too", tc.path)
			}
			noScript(t, body)
		}
		// The partition's actions are in its content, outside the region.
		body := get(t, e.h, parked, true).Body.String()
		require.Contains(t, forms(body), "resume")
		require.Contains(t, region(t, body, "dl", "state"), `<span class="state st-parked">parked</span>`)
		require.Contains(t, region(t, get(t, e.h, evilPath, true).Body.String(), "nav", "counts"), `>parked 1</a>`)

		w := get(t, e.h, "/queues/"+url.PathEscape(evilURLQueue), true)
		require.Equal(t, http.StatusNotFound, w.Code)
		require.NotContains(t, w.Body.String(), "<html")
		noScript(t, w.Body.String())
	})

	t.Run("outcome polls its page", func(t *testing.T) {
		_, body := do(t, e.h, "GET", parked, nil)
		stale := forms(body)["resume"]
		stale.Set("attempts", "0")
		code, body := do(t, e.h, "POST", parked+"/resume", stale)
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, `data-live-src="../1"`)
		u, err := url.Parse("http://x" + parked + "/resume")
		require.NoError(t, err)
		require.Equal(t, parked, u.ResolveReference(&url.URL{Path: "../1"}).Path)
	})

	t.Run("charts", func(t *testing.T) {
		h, err := ui.New(e.admin, ui.WithLogger(slog.New(slog.DiscardHandler)), ui.WithSampleInterval(50*time.Millisecond))
		require.NoError(t, err)
		defer h.Close()
		rateRE := regexp.MustCompile(`<td class="num rate">([^<]*)</td>`)
		body := get(t, h, "/", false).Body.String()
		if strings.Count(body, `<svg class="spark"`) == 0 {
			require.Contains(t, body, "collecting samples")
		}
		for i := range 40 {
			e.enqueue("wide", i%1024, "ok")
		}
		// Observable progress: every queue has a rate and both charts, and
		// the 40 deliveries show in wide's throughput.
		tputRE := regexp.MustCompile(`aria-label="wide: delivered per second over the last [^,"]+, now [0-9.]+, max ([0-9.]+)"`)
		deadline := time.Now().Add(60 * time.Second)
		for {
			body = get(t, h, "/", false).Body.String()
			rates := rateRE.FindAllStringSubmatch(body, -1)
			ok := len(rates) == 4 && strings.Count(body, `<svg class="spark"`) == 8
			for _, r := range rates {
				ok = ok && r[1] != "—"
			}
			if m := tputRE.FindStringSubmatch(body); ok && m != nil {
				if f, _ := strconv.ParseFloat(m[1], 64); f > 0 {
					break
				}
			}
			require.False(t, time.Now().After(deadline), "no charts with wide's deliveries: %s", body)
			time.Sleep(20 * time.Millisecond)
		}
		// block holds its head and, since the messages subtest, two behind it.
		require.Regexp(t, `<title>block: backlog over the last 3m0s, now 3, max 3, oldest unprocessed up to [^<]+</title>`, body)
		require.Regexp(t, `<path class="line" d="M[0-9.,MLh]+"></path>`, body)
		// The live fragment carries the charts too.
		require.Contains(t, region(t, get(t, h, "/", true).Body.String(), "section", "charts"), `<svg class="spark"`)
		noScript(t, body)
	})
}
