// Package ui is seqbox's operator web UI: an http.Handler, server-rendered
// with html/template, an embedded stylesheet and a small embedded script
// for live updates (no CDN; every page works without JavaScript), that an
// application mounts under a path prefix behind its own middleware
// (docs/ARCHITECTURE.md, "The web UI").
//
// Its screens each have a stable URL relative to where the handler is
// mounted:
//
//	/                                  the overview: every queue's backlog, oldest unprocessed age,
//	                                   delivered/s, dead letters by status, parked and retrying
//	                                   partitions, and charts of depth and throughput over the last hour
//	/queues/{queue}                    every partition of a queue as a cell coloured by state,
//	                                   filtered by ?state=idle|busy|retrying|parked
//	/queues/{queue}/partitions/{n}     one partition's head of line, with the actions that apply
//	/deadletters                       dead letters by filter, keyset-paged; /deadletters/{id} one letter
//	/deadletters/confirm?action=…      a bulk action's exact count and confirmation (deadletters.go)
//	/purge                             purge by header: a preview, then a confirmation (purge.go)
//
// and actions, POSTs to /queues/{queue}/partitions/{n}/{resume,retry,skip},
// /deadletters/{id}/{replay,resolve,discard}, /deadletters/{replay,resolve,discard}
// (bulk, by filter) and /purge. Every link the handler renders is relative, so
// it works under any prefix stripped with http.StripPrefix. Actions carry a
// CSRF token (an HMAC, under a secret drawn when New runs, of what the action
// names) and what the page showed (a partition's state; a bulk action's count
// and highest id; a purge's count); when that changed since, the handler does
// nothing and shows what changed (409). Each action is logged with slog.
//
// The overview's charts come from a sampler, one goroutine per Handler that
// reads Admin.Stats every WithSampleInterval and keeps the last hour in
// memory; Close stops it. Pages refresh their live regions (elements with a
// data-live attribute) by polling: the script asks for the page with the
// header X-Seqbox-Live: 1 and the handler renders its content alone.
package ui

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
)

//go:embed assets
var assets embed.FS

// Option configures New. An option given a bad value makes New fail.
type Option func(*config) error

type config struct {
	readOnly       bool
	log            *slog.Logger
	identity       func(*http.Request) string
	sampleInterval time.Duration
	// chartWindow, when set, replaces the charts' hour: only the
	// screenshot generator sets it (export_test.go), to draw an hour's
	// shapes from seconds of traffic.
	chartWindow time.Duration
}

// liveRefresh is how often a visible page polls its live regions.
const liveRefresh = 2 * time.Second

// ReadOnly hides every action and refuses their POSTs (403).
func ReadOnly() Option { return func(c *config) error { c.readOnly = true; return nil } }

// WithLogger sets the logger of the action log (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("seqbox/ui: WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithIdentity sets how the action log names who acted, typically from
// what the application's auth middleware put in the request's context
// (default: "anonymous").
func WithIdentity(fn func(*http.Request) string) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("seqbox/ui: WithIdentity: nil func")
		}
		c.identity = fn
		return nil
	}
}

// WithSampleInterval sets how often the sampler reads Admin.Stats for the
// overview's charts and delivered/s (default 10s). The charts keep an hour
// of samples, at most 3,600 per queue: an interval under a second covers
// less than an hour.
func WithSampleInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("seqbox/ui: WithSampleInterval: %v is not positive", d)
		}
		c.sampleInterval = d
		return nil
	}
}

// Handler is the UI, an http.Handler. It runs a sampler goroutine for the
// overview's charts until Close.
type Handler struct {
	h *handler
}

// ServeHTTP serves the UI's pages, assets and actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Close stops the sampler and waits for it to end. The pages are still
// served, their charts no longer updated. Close is idempotent; its error
// is always nil.
func (h *Handler) Close() error {
	h.h.sampler.stop()
	return nil
}

type handler struct {
	config
	admin   *seqbox.Admin
	secret  []byte
	tmpl    map[string]*template.Template
	css     []byte
	js      []byte
	mux     *http.ServeMux
	sampler *sampler
}

// New returns the UI of admin's outbox, its sampler started: Close it
// when done.
func New(admin *seqbox.Admin, opts ...Option) (*Handler, error) {
	if admin == nil {
		return nil, errors.New("seqbox/ui: New: nil Admin")
	}
	h := &handler{admin: admin, config: config{log: slog.Default(), identity: func(*http.Request) string { return "anonymous" },
		sampleInterval: 10 * time.Second}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("seqbox/ui: New: nil Option")
		}
		if err := o(&h.config); err != nil {
			return nil, err
		}
	}
	h.secret = make([]byte, 32)
	if _, err := rand.Read(h.secret); err != nil {
		return nil, fmt.Errorf("seqbox/ui: CSRF secret: %w", err)
	}
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return nil, err
	}
	h.css = css
	if h.js, err = assets.ReadFile("assets/live.js"); err != nil {
		return nil, err
	}
	h.tmpl = map[string]*template.Template{}
	for _, page := range []string{"overview", "queue", "partition", "error", "deadletters", "deadletter", "confirm", "purge"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("seqbox/ui: template %s: %w", page, err)
		}
		h.tmpl[page] = t
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /style.css", h.style)
	mux.HandleFunc("GET /live.js", h.script)
	mux.HandleFunc("GET /queues/{queue}", h.queue)
	mux.HandleFunc("GET /queues/{queue}/partitions/{n}", h.partition)
	mux.HandleFunc("POST /queues/{queue}/partitions/{n}/{action}", h.act)
	mux.HandleFunc("GET /deadletters", h.deadLetters)
	mux.HandleFunc("GET /deadletters/confirm", h.confirm)
	mux.HandleFunc("GET /deadletters/{id}", h.deadLetter)
	mux.HandleFunc("POST /deadletters/{action}", h.actBulk)
	mux.HandleFunc("POST /deadletters/{id}/{action}", h.actOne)
	mux.HandleFunc("GET /purge", h.purge)
	mux.HandleFunc("POST /purge", h.doPurge)
	h.mux = mux
	h.sampler = newSampler(admin, h.sampleInterval, h.log, time.Now)
	if h.chartWindow > 0 {
		h.sampler.setWindow(h.chartWindow)
	}
	t := time.NewTicker(h.sampleInterval)
	h.sampler.start(t.C, t.Stop)
	return &Handler{h}, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

func (h *handler) style(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(h.css)
}

func (h *handler) script(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write(h.js)
}

var funcs = template.FuncMap{
	"pathEscape": pathEscape,
	"age": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return ago(time.Since(t))
	},
	// chartOf names a chart for the "chart" template.
	"chartOf": func(name string, c chart) any {
		return struct {
			Name  string
			Chart chart
		}{name, c}
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format(time.RFC3339)
	},
}

// pathEscape escapes one path segment. Queue names are [A-Za-z0-9._-]
// today; a URL's queue segment, untrusted, is echoed escaped.
func pathEscape(s string) string { return url.PathEscape(s) }

func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// root is the relative path from the request's page back to the handler's
// root: "./" at "/", "../../" at "/queues/q". Links built on it work under
// any prefix the application strips.
func root(r *http.Request) string {
	n := strings.Count(r.URL.EscapedPath(), "/") - 1
	if n <= 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

type page struct {
	Root     string
	Title    string
	ReadOnly bool
	// Refresh is the seconds between live updates; LiveSrc the page they
	// poll, when it is not the page's own URL (an action's outcome, shown
	// at the POST's URL, polls the page the action was posted from).
	Refresh int
	LiveSrc string
	Data    any
}

// render writes page name: the whole page, or its content alone for a
// live update (contentOnly).
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Root: root(r), Title: title, ReadOnly: h.readOnly, Refresh: int(liveRefresh / time.Second), Data: data}
	if r.Method == http.MethodPost {
		// An action's URL is its page's plus one segment: poll the page.
		esc := r.URL.EscapedPath()
		p.LiveSrc = "../" + path.Base(path.Dir(esc))
	}
	var b strings.Builder
	var err error
	if contentOnly(r) {
		err = h.tmpl[name].ExecuteTemplate(&b, "content", p)
	} else {
		err = h.tmpl[name].Execute(&b, p)
	}
	w.Header().Add("Vary", liveHeader) // one URL, two representations: keep caches from mixing them
	if err != nil {
		h.log.ErrorContext(r.Context(), "seqbox ui: render", "page", name, "err", err)
		http.Error(w, "seqbox ui: render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// liveHeader marks the script's requests for a page's live regions.
const liveHeader = "X-Seqbox-Live"

// contentOnly reports a live update: the page's script asks for the
// content block without the layout, and swaps in its data-live elements.
func contentOnly(r *http.Request) bool { return r.Header.Get(liveHeader) == "1" }

func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", http.StatusText(status), struct {
		Status  int
		Message string
	}{status, msg})
}

func (h *handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "seqbox ui: read", "path", r.URL.Path, "err", err)
	h.fail(w, r, http.StatusInternalServerError, err.Error())
}

// cellState is a partition's state on the grid.
func cellState(p outbox.PartitionStats) string {
	switch {
	case p.Parked:
		return "parked"
	case p.Retrying():
		return "retrying"
	case p.Incoming+p.Unprocessed > 0:
		return "busy"
	}
	return "idle"
}

var cellStates = []string{"idle", "busy", "retrying", "parked"}

type queueRow struct {
	outbox.QueueStats
	Backlog     int64
	DeadLetters []statusCount
	Failing     []seqbox.PartitionState
	// Charts are the sampler's: delivered/s and the last hour.
	Charts queueCharts
}

type statusCount struct {
	Status string
	N      int64
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	st, err := h.admin.Stats(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	failing, err := h.admin.Partitions().Failing(r.Context(), "")
	if err != nil {
		h.internal(w, r, err)
		return
	}
	rows := make([]queueRow, len(st.Queues))
	index := map[string]int{}
	now := h.sampler.now()
	for i, q := range st.Queues {
		rows[i] = queueRow{QueueStats: q, Backlog: q.Incoming + q.Unprocessed, DeadLetters: counts(q.DeadLetters),
			Charts: h.sampler.charts(q.Queue, now)}
		index[q.Queue] = i
	}
	for _, f := range failing {
		if i, ok := index[f.Queue]; ok {
			rows[i].Failing = append(rows[i].Failing, f)
		}
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", rows)
}

func counts(m map[string]int64) []statusCount {
	var out []statusCount
	for _, s := range []string{"pending", "replayed", "resolved", "discarded"} {
		if m[s] > 0 {
			out = append(out, statusCount{s, m[s]})
		}
	}
	var other []string
	for s, n := range m {
		switch s {
		case "pending", "replayed", "resolved", "discarded":
		default:
			if n > 0 {
				other = append(other, s)
			}
		}
	}
	slices.Sort(other)
	for _, s := range other {
		out = append(out, statusCount{s, m[s]})
	}
	return out
}

type cell struct {
	outbox.PartitionStats
	State string
	// Lag is how far behind a partition with a backlog is, by the age
	// of its oldest unprocessed message: "" under 10 s, "lag-s" under a
	// minute, "lag-m" beyond; the grid marks it on the cell.
	Lag string
}

func lagClass(p outbox.PartitionStats, now time.Time) string {
	if p.OldestUnprocessed.IsZero() {
		return ""
	}
	switch age := now.Sub(p.OldestUnprocessed); {
	case age >= time.Minute:
		return "lag-m"
	case age >= 10*time.Second:
		return "lag-s"
	}
	return ""
}

type queuePage struct {
	Queue  string
	Filter string
	States []stateCount
	Cells  []cell
	Total  int
}

type stateCount struct {
	State  string
	N      int
	Active bool
}

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	filter := r.URL.Query().Get("state")
	if filter != "" && !slices.Contains(cellStates, filter) {
		h.fail(w, r, http.StatusBadRequest, "unknown state filter "+strconv.Quote(filter)+"; one of idle, busy, retrying, parked")
		return
	}
	st, err := h.admin.Stats(r.Context())
	now := time.Now()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := queuePage{Queue: queue, Filter: filter}
	n := map[string]int{}
	for _, ps := range st.Partitions {
		if ps.Queue != queue {
			continue
		}
		p.Total++
		s := cellState(ps)
		n[s]++
		if filter == "" || filter == s {
			p.Cells = append(p.Cells, cell{ps, s, lagClass(ps, now)})
		}
	}
	if p.Total == 0 {
		h.fail(w, r, http.StatusNotFound, "no queue "+strconv.Quote(queue))
		return
	}
	for _, s := range cellStates {
		p.States = append(p.States, stateCount{s, n[s], s == filter})
	}
	h.render(w, r, http.StatusOK, "queue", queue, p)
}
