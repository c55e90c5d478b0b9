package ui

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox/outbox"
)

// The purge screen (docs/ARCHITECTURE.md, "The web UI"):
//
//	GET  /purge                          the form: a queue and header lines
//	GET  /purge?queue=…&header=n=v       the preview: what a purge would remove now, per partition
//	POST /purge                          the purge, if the preview still counts what was shown

type purgePage struct {
	Queue   string
	Headers []string
	Queues  []string
	Problem string
	// Preview is the preview shown (nil: only the form); Count is the
	// messages it would purge, the number the purge button names.
	Preview *outbox.PurgeResult
	Count   int
	Token   string
	// Done is a purge's result; Outcome says it, or why nothing was done.
	Done    *outbox.PurgeResult
	Outcome string
	Changed bool
}

// HeaderText is the header lines for the form's textarea.
func (p purgePage) HeaderText() string { return strings.Join(p.Headers, "\n") }

// purged is what a purge result counts as removed: the in-flight
// messages are left to their delivery.
func purged(r outbox.PurgeResult) int { return r.Incoming + r.Outgoing }

// purgeForm reads a purge's queue and headers; the problem is a sentence.
func (h *handler) purgeForm(r *http.Request, v url.Values) (purgePage, outbox.PurgeFilter, error) {
	p := purgePage{Queue: strings.TrimSpace(v.Get("queue"))}
	var f outbox.PurgeFilter
	var err error
	p.Headers, f.Headers, err = parseHeaders(v["header"])
	queues, known, qerr := h.queueNames(r, p.Queue)
	if qerr != nil {
		return p, f, qerr
	}
	p.Queues = queues
	switch {
	case err != nil:
		p.Problem = err.Error()
	case p.Queue == "":
		p.Problem = "choose a queue"
	case len(f.Headers) == 0:
		p.Problem = "give at least one header as name=value: a purge of a whole queue is not offered"
	default:
		if verr := f.Validate(); verr != nil {
			p.Problem = verr.Error()
		} else if !known {
			p.Problem = fmt.Sprintf("no queue %q", p.Queue)
		}
	}
	return p, f, nil
}

// purge shows the form, or with a queue and headers the preview: one
// PreviewPurge, which counts per partition and changes nothing.
func (h *handler) purge(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	p, f, err := h.purgeForm(r, v)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !v.Has("queue") && !v.Has("header") {
		p.Problem = ""
		h.render(w, r, http.StatusOK, "purge", "Purge", p)
		return
	}
	if p.Problem != "" {
		h.render(w, r, http.StatusBadRequest, "purge", "Purge", p)
		return
	}
	if err := h.preview(r, &p, f); err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "purge", "Purge preview", p)
}

func (h *handler) preview(r *http.Request, p *purgePage, f outbox.PurgeFilter) error {
	res, err := h.admin.PreviewPurge(r.Context(), p.Queue, f)
	if err != nil {
		return err
	}
	p.Preview, p.Count = &res, purged(res)
	if !h.readOnly {
		p.Token = h.token("purge", p.Queue)
	}
	return nil
}

// doPurge purges if a fresh preview still counts what the confirmed one
// showed. That bounds the purge but cannot make it exact: Admin.Purge
// removes what matches when it runs, partition by partition, and a
// message enqueued or delivered between this preview and the purge is
// not excluded the way the dead-letter actions' id bound excludes one
// (docs/ARCHITECTURE.md, "The web UI").
func (h *handler) doPurge(w http.ResponseWriter, r *http.Request) {
	who := h.identity(r)
	queue := r.PostFormValue("queue")
	var filter string
	shown := -1
	logAttrs := func(outcome string) []any {
		return []any{"who", who, "action", "purge", "queue", queue, "filter", filter, "count", shown, "outcome", outcome}
	}
	if h.readOnly {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: read-only"))
		h.fail(w, r, http.StatusForbidden, "this UI is read-only")
		return
	}
	if !h.checkToken(r, "purge", queue) {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: bad CSRF token"))
		h.fail(w, r, http.StatusForbidden, "bad or missing CSRF token; reload the page and try again")
		return
	}
	p, f, err := h.purgeForm(r, r.PostForm)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	filter = strings.Join(p.Headers, " ")
	if p.Problem != "" {
		h.render(w, r, http.StatusBadRequest, "purge", "Purge", p)
		return
	}
	n, err := strconv.Atoi(r.PostFormValue("count"))
	if err != nil || n <= 0 {
		h.fail(w, r, http.StatusBadRequest, "the form lacks the count it showed (count)")
		return
	}
	shown = n
	if err := h.preview(r, &p, f); err != nil {
		h.internal(w, r, err)
		return
	}
	if p.Count != n {
		p.Outcome, p.Changed = fmt.Sprintf("not done: changed since the preview, which counted %d: now %d", n, p.Count), true
		h.logAction(r, slog.LevelInfo, logAttrs(p.Outcome))
		h.render(w, r, http.StatusConflict, "purge", "Purge preview", p)
		return
	}
	res, err := h.admin.Purge(r.Context(), queue, f)
	if err != nil {
		// Purge reports what it did before it failed (a context ended
		// while it waited for a delivery): say that too.
		err = fmt.Errorf("purge stopped after %d messages: %w", purged(res), err)
		h.logAction(r, slog.LevelError, logAttrs("failed: "+err.Error()))
		h.internal(w, r, err)
		return
	}
	p.Preview, p.Token, p.Done = nil, "", &res
	p.Outcome = fmt.Sprintf("Purged %d messages", purged(res))
	h.logAction(r, slog.LevelInfo, logAttrs(p.Outcome))
	h.render(w, r, http.StatusOK, "purge", "Purged", p)
}
