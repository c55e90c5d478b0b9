package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
)

// partitionPage is what the partition screen shows, and what an action's
// outcome shows with it.
type partitionPage struct {
	State seqbox.PartitionState
	Stats outbox.PartitionStats
	// Head is the next message to deliver (nil: none sequenced); Behind
	// are the next ones after it, up to behindShown.
	Head    *messageView
	Behind  []messageView
	More    bool
	Actions []actionForm
	// Outcome is the last action's result; Changed says it was refused
	// because the state changed.
	Outcome string
	Changed bool
}

// actionForm is one button: the action, its CSRF token and the state
// the page showed, which the POST sends back.
type actionForm struct {
	Action, Label, Token string
	Shown                shown
}

// shown is the state an action is conditional on.
type shown struct {
	State    seqbox.State
	HeadSeq  int64
	Attempts int
}

func (s shown) String() string {
	return fmt.Sprintf("%s, head seq %d, %d attempts", s.State, s.HeadSeq, s.Attempts)
}

var actions = []struct{ Action, Label string }{
	{seqbox.ActionResume, "Resume"},
	{seqbox.ActionRetry, "Retry now"},
	{seqbox.ActionSkip, "Skip head to dead letters"},
}

// messageView is a queued message as the partition page shows it.
type messageView struct {
	seqbox.QueuedMessage
	View    payloadView
	Preview string
}

// behindShown is how many messages behind the head the page lists.
const behindShown = 20

// token is the CSRF token of what an action names (its kind, the action,
// its object): an HMAC under the handler's secret of the parts, each
// length-prefixed so that no two lists of parts share a token.
func (h *handler) token(parts ...string) string {
	m := hmac.New(sha256.New, h.secret)
	for _, p := range parts {
		fmt.Fprintf(m, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// checkToken says whether a POST's csrf field is the token of parts.
func (h *handler) checkToken(r *http.Request, parts ...string) bool {
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(h.token(parts...)))
}

// partitionToken is the CSRF token of an action on a partition.
func (h *handler) partitionToken(action, queue string, partition int) string {
	return h.token("partition", action, queue, strconv.Itoa(partition))
}

// load reads a partition's state and stats; status is 404 for an unknown one.
func (h *handler) load(r *http.Request) (partitionPage, int, error) {
	queue := r.PathValue("queue")
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 {
		return partitionPage{}, http.StatusNotFound, fmt.Errorf("no partition %q of queue %q", r.PathValue("n"), queue)
	}
	ps, err := h.admin.Partitions().State(r.Context(), queue, n)
	if errors.Is(err, seqbox.ErrUnknownPartition) {
		return partitionPage{}, http.StatusNotFound, fmt.Errorf("no partition %d of queue %q", n, queue)
	}
	if err != nil {
		return partitionPage{}, http.StatusInternalServerError, err
	}
	p := partitionPage{State: ps}
	msgs, err := h.admin.Partitions().Messages(r.Context(), queue, n, behindShown+2)
	if err != nil {
		return partitionPage{}, http.StatusInternalServerError, err
	}
	if len(msgs) > 0 {
		p.Head = &messageView{QueuedMessage: msgs[0], View: viewPayload(msgs[0].Payload)}
		msgs = msgs[1:]
	}
	if len(msgs) > behindShown {
		p.More, msgs = true, msgs[:behindShown]
	}
	for _, m := range msgs {
		p.Behind = append(p.Behind, messageView{QueuedMessage: m, Preview: preview(m.Payload, 80)})
	}
	if p.Stats, err = h.admin.PartitionStats(r.Context(), queue, n); err != nil {
		return partitionPage{}, http.StatusInternalServerError, err
	}
	if !h.readOnly {
		for _, a := range actions {
			if ps.Check(a.Action) == nil || (a.Action != seqbox.ActionResume && errors.Is(ps.Check(a.Action), seqbox.ErrPartitionBusy)) {
				p.Actions = append(p.Actions, actionForm{Action: a.Action, Label: a.Label, Token: h.partitionToken(a.Action, queue, n),
					Shown: shown{ps.State, ps.HeadSeq, ps.Attempts}})
			}
		}
	}
	return p, http.StatusOK, nil
}

func (h *handler) partition(w http.ResponseWriter, r *http.Request) {
	p, status, err := h.load(r)
	if err != nil {
		h.failStatus(w, r, status, err)
		return
	}
	h.render(w, r, http.StatusOK, "partition", title(p.State), p)
}

func title(ps seqbox.PartitionState) string {
	return fmt.Sprintf("%s / partition %d", ps.Queue, ps.Partition)
}

func (h *handler) failStatus(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == http.StatusInternalServerError {
		h.internal(w, r, err)
		return
	}
	h.fail(w, r, status, err.Error())
}

// actionLog is the message of every line of the action log.
const actionLog = "seqbox ui action"

// logAction writes one line of the action log: who did what, and how it
// ended, as attrs say.
func (h *handler) logAction(r *http.Request, level slog.Level, attrs []any) {
	h.log.Log(r.Context(), level, actionLog, attrs...)
}

// act runs an action: read-only refused, then the partition found, the
// CSRF token checked, and the action taken conditional on the state the
// page showed, which the API compares under the partition's row lock.
func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	queue := r.PathValue("queue")
	who := h.identity(r)
	logAttrs := func(outcome string) []any {
		return []any{"who", who, "action", action, "queue", queue, "partition", r.PathValue("n"), "outcome", outcome}
	}
	if h.readOnly {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: read-only"))
		h.fail(w, r, http.StatusForbidden, "this UI is read-only")
		return
	}
	if action != seqbox.ActionResume && action != seqbox.ActionRetry && action != seqbox.ActionSkip {
		h.fail(w, r, http.StatusNotFound, "no action "+strconv.Quote(action))
		return
	}
	p, status, err := h.load(r)
	if err != nil {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: "+err.Error()))
		h.failStatus(w, r, status, err)
		return
	}
	ps := p.State
	if !h.checkToken(r, "partition", action, queue, strconv.Itoa(ps.Partition)) {
		h.logAction(r, slog.LevelWarn, logAttrs("refused: bad CSRF token"))
		h.fail(w, r, http.StatusForbidden, "bad or missing CSRF token; reload the page and try again")
		return
	}
	headSeq, err1 := strconv.ParseInt(r.PostFormValue("head_seq"), 10, 64)
	attempts, err2 := strconv.Atoi(r.PostFormValue("attempts"))
	if err1 != nil || err2 != nil || r.PostFormValue("state") == "" {
		h.fail(w, r, http.StatusBadRequest, "the form lacks the state it was shown (state, head_seq, attempts)")
		return
	}
	// The API compares what the page showed with the partition under its
	// row lock: of two operators acting on one page, one acts, the other
	// is told what changed (ErrStateChanged).
	was := seqbox.IfUnchanged(seqbox.PartitionState{State: seqbox.State(r.PostFormValue("state")), HeadSeq: headSeq, Attempts: attempts})
	parts := h.admin.Partitions()
	var done string
	switch action {
	case seqbox.ActionResume:
		_, err = parts.Resume(r.Context(), queue, ps.Partition, was)
		done = "resumed: the head is retried now"
	case seqbox.ActionRetry:
		_, err = parts.RetryNow(r.Context(), queue, ps.Partition, was)
		done = "retried now"
	case seqbox.ActionSkip:
		var sk seqbox.Skipped
		sk, err = parts.Skip(r.Context(), queue, ps.Partition, was)
		done = fmt.Sprintf("skipped: head seq %d went to dead letters as message %s", sk.HeadSeq, sk.MessageID.String())
	}
	var pe *seqbox.PartitionError
	switch {
	case errors.As(err, &pe):
		outcome := "not done: " + strings.TrimPrefix(pe.Err.Error(), "seqbox: ")
		h.logAction(r, slog.LevelInfo, logAttrs(outcome))
		p, status, err = h.load(r)
		if err != nil {
			h.failStatus(w, r, status, err)
			return
		}
		p.Outcome, p.Changed = outcome, true
		h.render(w, r, http.StatusConflict, "partition", title(ps), p)
		return
	case err != nil:
		h.logAction(r, slog.LevelError, logAttrs("failed: "+err.Error()))
		h.internal(w, r, err)
		return
	}
	h.logAction(r, slog.LevelInfo, logAttrs(done))
	p, status, err = h.load(r)
	if err != nil {
		h.failStatus(w, r, status, err)
		return
	}
	p.Outcome = done
	h.render(w, r, http.StatusOK, "partition", title(p.State), p)
}
