package ui

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/outbox"
)

// The dead-letter screens (docs/ARCHITECTURE.md, "The web UI"):
//
//	GET  /deadletters                    the filtered list, keyset-paged, with the count by status
//	GET  /deadletters/{id}               one letter (by its row id; a message id redirects there)
//	POST /deadletters/{id}/{action}      replay, resolve or discard that letter
//	GET  /deadletters/confirm?action=…   a bulk action's confirmation: the exact count, a sample
//	POST /deadletters/{action}           the bulk action, conditional on the count and id bound shown

const (
	// dlPageSize is the list's page size.
	dlPageSize = 50
	// dlSample is how many of the matching letters a confirmation shows.
	dlSample = 5
	// dlErrorShown bounds the error text in a list row (its first line).
	dlErrorShown = 120
)

// dlStatuses are the status filter's choices; "any" is no status filter.
var dlStatuses = []string{"pending", "replayed", "resolved", "discarded", "any"}

// dlActions are the actions on pending letters, with their words.
var dlActions = map[string]struct{ Verb, Done, Field string }{
	"replay":  {"replay", "Replayed", ""},
	"resolve": {"resolve", "Resolved", "note"},
	"discard": {"discard", "Discarded", "reason"},
}

// dlQuery is the filter form as given: the page echoes it back, and its
// links and forms carry it on.
type dlQuery struct {
	Queue, Partition, Status, Type, Error, From, To string
	// Headers are the "name=value" lines as given, one a line.
	Headers []string
}

// HeaderText is the header lines for the form's textarea.
func (q dlQuery) HeaderText() string { return strings.Join(q.Headers, "\n") }

// values encodes the query for a link or a form; a status is always
// given, so the link means the same whatever the default.
func (q dlQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("queue", q.Queue)
	set("partition", q.Partition)
	set("status", q.Status)
	set("type", q.Type)
	set("error", q.Error)
	set("from", q.From)
	set("to", q.To)
	for _, h := range q.Headers {
		v.Add("header", h)
	}
	return v
}

// Fields are the query's form fields, for a confirmation's hidden inputs.
func (q dlQuery) Fields() []field {
	v := q.values()
	var out []field
	for _, k := range slices.Sorted(maps.Keys(v)) {
		for _, s := range v[k] {
			out = append(out, field{k, s})
		}
	}
	return out
}

type field struct{ Name, Value string }

// parseDLQuery reads the filter form; problems lists what is wrong with
// it, each a sentence for the operator.
func parseDLQuery(v url.Values) (q dlQuery, f deadletter.Filter, problems []string) {
	q = dlQuery{Queue: strings.TrimSpace(v.Get("queue")), Partition: strings.TrimSpace(v.Get("partition")),
		Status: v.Get("status"), Type: v.Get("type"), Error: v.Get("error"),
		From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to"))}
	if q.Status == "" {
		q.Status = string(deadletter.StatusPending)
	}
	f = deadletter.Filter{Queue: q.Queue, PayloadType: q.Type, ErrorContains: q.Error}
	if q.Partition != "" {
		n, err := strconv.Atoi(q.Partition)
		if err != nil || n < 0 {
			problems = append(problems, fmt.Sprintf("partition %q is not a partition number (0, 1, 2, …)", q.Partition))
		} else {
			f.Partitions = []int{n}
		}
	}
	switch {
	case q.Status == "any":
	case slices.Contains(dlStatuses, q.Status):
		f.Statuses = []deadletter.Status{deadletter.Status(q.Status)}
	default:
		problems = append(problems, fmt.Sprintf("status %q is not one of %s", q.Status, strings.Join(dlStatuses, ", ")))
	}
	// A browser sends a form's line breaks as CRLF, so a multi-line error
	// filter would not survive the confirmation's round trip unchanged.
	if strings.ContainsAny(q.Error, "\r\n") {
		problems = append(problems, "the error text to look for must be one line")
	}
	var err error
	if f.FailedFrom, err = parseTime(q.From); err != nil {
		problems = append(problems, "from: "+err.Error())
	}
	if f.FailedTo, err = parseTime(q.To); err != nil {
		problems = append(problems, "to: "+err.Error())
	}
	q.Headers, f.Headers, err = parseHeaders(v["header"])
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		if err := f.Validate(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return q, f, problems
}

// parseTime reads a datetime-local value (or RFC 3339), in UTC; "" is no bound.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2025-01-31T14:05 (UTC)", s)
}

// parseHeaders reads "name=value" lines (several a value, or several
// values); spaces around the name and the value are dropped, blank lines
// skipped. It returns the lines (normalized, or as given when wrong, so
// the form shows them again) and the map they mean.
func parseHeaders(given []string) ([]string, map[string]string, error) {
	var lines []string
	var m map[string]string
	var problem error
	for _, g := range given {
		for line := range strings.SplitSeq(g, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			name, value, ok := strings.Cut(line, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if m == nil {
				m = map[string]string{}
			}
			_, dup := m[name]
			switch {
			case !ok || name == "":
				problem = cmp.Or(problem, fmt.Errorf("header %q is not name=value", line))
			case dup:
				problem = cmp.Or(problem, fmt.Errorf("header %q is given twice", name))
			default:
				m[name] = value
				line = name + "=" + value
			}
			lines = append(lines, line)
		}
	}
	if problem != nil {
		return lines, nil, problem
	}
	return lines, m, nil
}

// words says in words which letters a filter selects, status aside.
func (q dlQuery) words() string {
	var b strings.Builder
	if q.Queue != "" {
		fmt.Fprintf(&b, " of queue %q", q.Queue)
		if q.Partition != "" {
			fmt.Fprintf(&b, ", partition %s", q.Partition)
		}
	} else {
		b.WriteString(" of every queue")
	}
	if q.Type != "" {
		fmt.Fprintf(&b, ", payload type %q", q.Type)
	}
	switch {
	case q.From != "" && q.To != "":
		fmt.Fprintf(&b, ", dead-lettered from %s until %s UTC", q.From, q.To)
	case q.From != "":
		fmt.Fprintf(&b, ", dead-lettered from %s UTC", q.From)
	case q.To != "":
		fmt.Fprintf(&b, ", dead-lettered before %s UTC", q.To)
	}
	if q.Error != "" {
		fmt.Fprintf(&b, ", whose last error contains %q", q.Error)
	}
	for _, h := range q.Headers {
		name, value, _ := strings.Cut(h, "=")
		fmt.Fprintf(&b, ", with header %q = %q", name, value)
	}
	return b.String()
}

// dlRow is a letter as a list row.
type dlRow struct {
	deadletter.Letter
	ErrorLine string
}

func dlRows(ls []deadletter.Letter) []dlRow {
	out := make([]dlRow, len(ls))
	for i, l := range ls {
		out[i] = dlRow{l, firstLine(l.LastError, dlErrorShown)}
	}
	return out
}

// firstLine is s's first line, cut to n runes.
func firstLine(s string, n int) string {
	line, _, more := strings.Cut(s, "\n")
	line = strings.TrimRight(line, "\r")
	if utf8.RuneCountInString(line) > n {
		r := []rune(line)
		return string(r[:n]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

type dlListPage struct {
	Q        dlQuery
	Queues   []string
	Statuses []string
	Problems []string
	// Tally counts the letters the filter matches, status aside, by
	// status; Matching is how many of them the status filter keeps.
	Tally    []tallyLink
	Total    int64
	Matching int64
	Letters  []dlRow
	// Next, First: the links to the next page and back to the first.
	Next, First string
	Bulk        []bulkButton
}

// bulkButton leads to a bulk action's confirmation: a GET form, so a
// button (it changes nothing), carrying the filter.
type bulkButton struct {
	Label, Action string
	Fields        []field
}

// tallyLink is a status's count, linked to the list of that status.
type tallyLink struct {
	Status string
	N      int64
	URL    string
}

// queueNames lists the registered queues for a form's select, and says
// whether the queue given (from the URL) is one of them.
func (h *handler) queueNames(r *http.Request, given string) (names []string, known bool, err error) {
	qs, err := h.admin.Queues(r.Context())
	if err != nil {
		return nil, false, err
	}
	names = make([]string, 0, len(qs)+1)
	for _, q := range qs {
		names = append(names, q.Name)
	}
	known = slices.Contains(names, given)
	// A queue from the URL that is not registered stays selected, so the
	// form shows what was asked (it matches nothing).
	if given != "" && !known {
		names = append(names, given)
	}
	return names, known, nil
}

// deadLetters is the list: one Tally (the filter without its status, for
// the count by status) and one page of List, limit+1 to know of a next.
func (h *handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	q, f, problems := parseDLQuery(r.URL.Query())
	var after int64
	if a := r.URL.Query().Get("after"); a != "" {
		var err error
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			problems = append(problems, fmt.Sprintf("after %q is not a letter id", a))
		}
	}
	queues, _, err := h.queueNames(r, q.Queue)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := dlListPage{Q: q, Queues: queues, Statuses: dlStatuses, Problems: problems}
	if len(problems) > 0 {
		h.render(w, r, http.StatusBadRequest, "deadletters", "Dead letters", p)
		return
	}
	dls := h.admin.DeadLetters()
	all := f
	all.Statuses = nil
	t, err := dls.Tally(r.Context(), all)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p.Total = t.Total
	byStatus := make(map[string]int64, len(t.ByStatus))
	for s, n := range t.ByStatus {
		byStatus[string(s)] = n
	}
	for _, c := range counts(byStatus) {
		v := q.values()
		v.Set("status", c.Status)
		p.Tally = append(p.Tally, tallyLink{c.Status, c.N, root(r) + "deadletters?" + v.Encode()})
	}
	p.Matching = t.Total
	if len(f.Statuses) > 0 {
		p.Matching = t.ByStatus[f.Statuses[0]]
	}
	page, err := dls.List(r.Context(), f, after, dlPageSize+1)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	ls := page.Letters
	base := root(r) + "deadletters?"
	if len(ls) > dlPageSize {
		ls = ls[:dlPageSize]
		v := q.values()
		v.Set("after", strconv.FormatInt(ls[len(ls)-1].ID, 10))
		p.Next = base + v.Encode()
	}
	if after > 0 {
		p.First = base + q.values().Encode()
	}
	p.Letters = dlRows(ls)
	if n := t.ByStatus[deadletter.StatusPending]; n > 0 && !h.readOnly && (q.Status == "any" || q.Status == string(deadletter.StatusPending)) {
		pending := q
		pending.Status = string(deadletter.StatusPending)
		for _, a := range []string{"replay", "resolve", "discard"} {
			p.Bulk = append(p.Bulk, bulkButton{fmt.Sprintf("%s all %d matching", capital(a), n), a, pending.Fields()})
		}
	}
	h.render(w, r, http.StatusOK, "deadletters", "Dead letters", p)
}

func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

type dlLetterPage struct {
	L       deadletter.Letter
	Payload payloadView
	// PayloadCut: only the first maxShownPayload bytes are shown.
	PayloadCut bool
	Headers    []field
	// Actions are the forms for a pending letter (none when read-only).
	Actions []dlAction
	Outcome string
	Changed bool
}

type dlAction struct {
	Action, Label, Token string
	// Field names the action's text input (note, reason), if any.
	Field string
}

// letter reads one letter by row id: List bounded to exactly that id
// (after id-1, MaxID id), a primary-key lookup.
func (h *handler) letter(r *http.Request, id int64) (deadletter.Letter, error) {
	page, err := h.admin.DeadLetters().List(r.Context(), deadletter.Filter{MaxID: id}, id-1, 1)
	if err != nil {
		return deadletter.Letter{}, err
	}
	if len(page.Letters) == 0 || page.Letters[0].ID != id {
		return deadletter.Letter{}, fmt.Errorf("%w: no dead letter %d", deadletter.ErrNotFound, id)
	}
	return page.Letters[0], nil
}

func (h *handler) letterPage(l deadletter.Letter) dlLetterPage {
	p := dlLetterPage{L: l, Payload: viewPayload(l.Payload), PayloadCut: len(l.Payload) > maxShownPayload}
	for _, k := range slices.Sorted(maps.Keys(l.Headers)) {
		p.Headers = append(p.Headers, field{k, l.Headers[k]})
	}
	if l.Status == deadletter.StatusPending && !h.readOnly {
		id := strconv.FormatInt(l.ID, 10)
		for _, a := range []string{"replay", "resolve", "discard"} {
			p.Actions = append(p.Actions, dlAction{Action: a, Label: capital(a), Token: h.token("deadletter", a, id), Field: dlActions[a].Field})
		}
	}
	return p
}

// letterID reads the {id} path segment: a row id, or a message id.
func letterID(s string) (int64, *outbox.MessageID) {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	if mid, err := outbox.ParseMessageID(s); err == nil {
		return 0, &mid
	}
	return 0, nil
}

func (h *handler) deadLetter(w http.ResponseWriter, r *http.Request) {
	id, mid := letterID(r.PathValue("id"))
	if mid != nil {
		// A message id, as logs and the CLI name a letter: found once
		// (DeadLetters.Get), then the page's stable URL is the row id's.
		l, err := h.admin.DeadLetters().Get(r.Context(), *mid)
		if errors.Is(err, deadletter.ErrNotFound) {
			h.fail(w, r, http.StatusNotFound, "no dead letter of message "+mid.String())
			return
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
		// Relative, as every link here: http.Redirect would make it
		// absolute from the path the prefix was stripped from.
		w.Header().Set("Location", strconv.FormatInt(l.ID, 10))
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	if id == 0 {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no dead letter %q: a letter id or a message id", r.PathValue("id")))
		return
	}
	l, err := h.letter(r, id)
	if errors.Is(err, deadletter.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "deadletter", fmt.Sprintf("Dead letter %d", l.ID), h.letterPage(l))
}

// actOne replays, resolves or discards one letter. The API acts only on a
// pending letter, under its row lock: of two operators, the second gets
// ErrWrongStatus and is shown the letter as the first left it (409).
func (h *handler) actOne(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	who := h.identity(r)
	logAttrs := func(outcome string) []any {
		return []any{"who", who, "action", action, "letter", r.PathValue("id"), "outcome", outcome}
	}
	if h.readOnly {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: read-only"))
		h.fail(w, r, http.StatusForbidden, "this UI is read-only")
		return
	}
	words, ok := dlActions[action]
	id, _ := letterID(r.PathValue("id"))
	if !ok || id == 0 {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no action %q on dead letter %q", action, r.PathValue("id")))
		return
	}
	if !h.checkToken(r, "deadletter", action, strconv.FormatInt(id, 10)) {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: bad CSRF token"))
		h.fail(w, r, http.StatusForbidden, "bad or missing CSRF token; reload the page and try again")
		return
	}
	dls := h.admin.DeadLetters()
	sel := deadletter.IDs(id)
	var done string
	var err error
	switch action {
	case "replay":
		var c deadletter.Changed
		if c, err = dls.Replay(r.Context(), sel); err == nil {
			done = "replayed as message " + c.ReplayIDs[0].String()
		}
	case "resolve":
		_, err = dls.Resolve(r.Context(), sel, r.PostFormValue("note"))
		done = "resolved"
	case "discard":
		_, err = dls.Discard(r.Context(), sel, r.PostFormValue("reason"))
		done = "discarded"
	}
	var se *deadletter.StatusError
	switch {
	case errors.As(err, &se):
		done = fmt.Sprintf("not done: another operator acted first; this letter is %s now, which %s does not apply to", se.Status, words.Verb)
	case errors.Is(err, deadletter.ErrNotFound):
		h.logAction(r, slog.LevelInfo, logAttrs("not done: "+err.Error()))
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	case err != nil:
		h.logAction(r, slog.LevelError, logAttrs("failed: "+err.Error()))
		h.internal(w, r, err)
		return
	}
	h.logAction(r, slog.LevelInfo, logAttrs(done))
	l, lerr := h.letter(r, id)
	if lerr != nil {
		h.internal(w, r, lerr)
		return
	}
	p := h.letterPage(l)
	status := http.StatusOK
	if se != nil {
		status, p.Changed = http.StatusConflict, true
	}
	p.Outcome = done
	h.render(w, r, status, "deadletter", fmt.Sprintf("Dead letter %d", l.ID), p)
}

// dlConfirmPage is a bulk action's confirmation, and its outcome.
type dlConfirmPage struct {
	Action, Verb, Field string
	Q                   dlQuery
	Words               string
	// Count and MaxID are what the confirmation counted: the pending
	// letters the filter matches and the highest id among them.
	Count  int64
	MaxID  int64
	Sample []dlRow
	Token  string
	// ListURL is the list with this filter; RecountURL the confirmation again.
	ListURL, RecountURL string
	Outcome             string
	Changed             bool
}

// bulkQuery reads a bulk action's filter (from a URL or a form) and makes
// it select pending letters only, as bulk actions do.
func (h *handler) bulkQuery(w http.ResponseWriter, r *http.Request, v url.Values) (dlQuery, deadletter.Filter, bool) {
	q, f, problems := parseDLQuery(v)
	if len(problems) == 0 && q.Status != "any" && q.Status != string(deadletter.StatusPending) {
		problems = append(problems, fmt.Sprintf("bulk actions apply to pending letters, and this filter selects %s ones", q.Status))
	}
	if len(problems) > 0 {
		h.fail(w, r, http.StatusBadRequest, strings.Join(problems, "; "))
		return q, f, false
	}
	q.Status = string(deadletter.StatusPending)
	f.Statuses = []deadletter.Status{deadletter.StatusPending}
	return q, f, true
}

func (h *handler) confirmPage(r *http.Request, action string, q dlQuery) dlConfirmPage {
	words := dlActions[action]
	v := q.values()
	list := root(r) + "deadletters?" + v.Encode()
	v.Set("action", action)
	return dlConfirmPage{Action: action, Verb: words.Verb, Field: words.Field, Q: q, Words: "pending letters" + q.words(),
		Token: h.token("deadletters", action), ListURL: list, RecountURL: root(r) + "deadletters/confirm?" + v.Encode()}
}

// confirm counts what a bulk action would act on (one Tally) and shows
// the first few (one List); its form carries that count and the highest
// id counted, which the action is then conditional on.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request) {
	if h.readOnly {
		h.fail(w, r, http.StatusForbidden, "this UI is read-only")
		return
	}
	action := r.URL.Query().Get("action")
	if _, ok := dlActions[action]; !ok {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("no bulk action %q; one of replay, resolve, discard", action))
		return
	}
	q, f, ok := h.bulkQuery(w, r, r.URL.Query())
	if !ok {
		return
	}
	p := h.confirmPage(r, action, q)
	dls := h.admin.DeadLetters()
	t, err := dls.Tally(r.Context(), f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p.Count, p.MaxID = t.ByStatus[deadletter.StatusPending], t.MaxID
	if p.Count > 0 {
		f.MaxID = t.MaxID
		page, err := dls.List(r.Context(), f, 0, dlSample)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		p.Sample = dlRows(page.Letters)
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm "+action, p)
}

// actBulk runs a confirmed bulk action on the pending letters the filter
// matches up to the id bound shown, conditional on the count shown: the
// API recounts under the rows' locks and changes nothing when it differs
// (CountError), so two operators confirming the same page never both act.
func (h *handler) actBulk(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	who := h.identity(r)
	var filter string
	var count int
	logAttrs := func(outcome string) []any {
		return []any{"who", who, "action", action, "filter", filter, "count", count, "outcome", outcome}
	}
	if h.readOnly {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: read-only"))
		h.fail(w, r, http.StatusForbidden, "this UI is read-only")
		return
	}
	words, ok := dlActions[action]
	if !ok {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no action %q", action))
		return
	}
	if !h.checkToken(r, "deadletters", action) {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: bad CSRF token"))
		h.fail(w, r, http.StatusForbidden, "bad or missing CSRF token; reload the page and try again")
		return
	}
	q, f, ok := h.bulkQuery(w, r, r.PostForm)
	if !ok {
		return
	}
	filter = q.values().Encode()
	maxID, err1 := strconv.ParseInt(r.PostFormValue("max_id"), 10, 64)
	count, err2 := strconv.Atoi(r.PostFormValue("count"))
	if err1 != nil || err2 != nil || maxID <= 0 || count <= 0 {
		// Expect 0 would make the action unconditional: never from a form.
		h.fail(w, r, http.StatusBadRequest, "the form lacks the count it showed (count, max_id)")
		return
	}
	f.MaxID = maxID
	sel := deadletter.Matching(f).Expecting(count)
	dls := h.admin.DeadLetters()
	var c deadletter.Changed
	var err error
	switch action {
	case "replay":
		c, err = dls.Replay(r.Context(), sel)
	case "resolve":
		c, err = dls.Resolve(r.Context(), sel, r.PostFormValue("note"))
	case "discard":
		c, err = dls.Discard(r.Context(), sel, r.PostFormValue("reason"))
	}
	p := h.confirmPage(r, action, q)
	p.Count, p.MaxID = int64(count), maxID
	var ce *deadletter.CountError
	switch {
	case errors.As(err, &ce):
		p.Outcome = fmt.Sprintf("not done: %d were shown, %d match now", ce.Expected, ce.Found)
	case errors.Is(err, deadletter.ErrNoMatch):
		p.Outcome = "not done: no pending letter matches now"
	case errors.Is(err, deadletter.ErrInvalidSelection):
		h.logAction(r, slog.LevelWarn, logAttrs("refused: "+err.Error()))
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		h.logAction(r, slog.LevelError, logAttrs("failed: "+err.Error()))
		h.internal(w, r, err)
		return
	default:
		p.Outcome = fmt.Sprintf("%s %d letters", words.Done, len(c.IDs))
		h.logAction(r, slog.LevelInfo, logAttrs(p.Outcome))
		h.render(w, r, http.StatusOK, "confirm", p.Outcome, p)
		return
	}
	h.logAction(r, slog.LevelInfo, logAttrs(p.Outcome))
	p.Changed = true
	h.render(w, r, http.StatusConflict, "confirm", "Not done", p)
}
