package seqboxcli

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
)

// dlqAction is one `seqbox dlq` subcommand.
type dlqAction struct {
	name, args, summary string
	// selects: the action takes --id or the filter flags; acts: it changes
	// letters, so it previews without --yes.
	selects, acts bool
}

func dlqActions() []dlqAction {
	return []dlqAction{
		{name: "list", summary: "list dead letters (filters, --after and --limit for pages)", selects: true},
		{name: "count", summary: "count dead letters by status", selects: true},
		{name: "show", args: " <message-id>", summary: "show one dead letter: payload, headers, error"},
		{name: "replay", summary: "re-enqueue pending letters at the tail of their partitions (--yes)", selects: true, acts: true},
		{name: "resolve", summary: "mark pending letters handled by hand, with --note (--yes)", selects: true, acts: true},
		{name: "discard", summary: "mark pending letters not to be handled, with --note as the reason (--yes)", selects: true, acts: true},
		{name: "purge", summary: "delete resolved and discarded letters older than --older-than (--yes)", selects: true, acts: true},
	}
}

// dlqCLI holds the flags of every dlq action.
type dlqCLI struct {
	dbFlags
	yes          bool
	ids          string
	queue        string
	partitions   string
	statuses     string
	payloadType  string
	failedFrom   string
	failedTo     string
	errorText    string
	headers      map[string]string
	after        int64
	limit        int
	note         string
	olderThan    time.Duration
	showPayloads bool
}

func dlqFlags(a dlqAction, c *dlqCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox dlq "+a.name, flag.ContinueOnError)
	c.register(fs)
	if a.selects {
		if a.name != "purge" {
			fs.StringVar(&c.ids, "id", "", "dead-letter ids, comma-separated (instead of the filters)")
		}
		fs.StringVar(&c.queue, "queue", "", "only this queue")
		fs.StringVar(&c.partitions, "partition", "", "only these partitions of --queue, comma-separated")
		fs.StringVar(&c.statuses, "status", "", "only these statuses, comma-separated: pending, replayed, resolved, discarded")
		fs.StringVar(&c.payloadType, "type", "", "only this payload type")
		fs.StringVar(&c.failedFrom, "failed-from", "", "dead-lettered at or after (RFC 3339, or a duration ago: 24h)")
		fs.StringVar(&c.failedTo, "failed-to", "", "dead-lettered before (RFC 3339, or a duration ago)")
		fs.StringVar(&c.errorText, "error", "", "only letters whose last error contains this text (case-sensitive)")
		headerFlag(fs, &c.headers, "name=value the letter's headers must hold (repeat: all must match)")
	}
	switch a.name {
	case "list":
		fs.Int64Var(&c.after, "after", 0, "list ids above this (the next page's --after is printed)")
		fs.IntVar(&c.limit, "limit", deadletter.DefaultPageSize, "letters per page")
		fs.BoolVar(&c.showPayloads, "payloads", false, "with --json: include payloads and headers")
	case "resolve", "discard":
		fs.StringVar(&c.note, "note", "", "why (stored with the letters)")
	case "purge":
		fs.DurationVar(&c.olderThan, "older-than", 30*24*time.Hour, "delete letters resolved or discarded longer ago than this")
	}
	if a.acts {
		fs.BoolVar(&c.yes, "yes", false, "do it (without it, print what would change)")
	}
	return fs
}

func dlqUsage(w io.Writer) {
	fmt.Fprint(w, "usage: seqbox dlq <action> --dsn DSN [flags]\n\nActions:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range dlqActions() {
		fmt.Fprintf(tw, "  %s%s\t%s\n", a.name, a.args, a.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nActions that change letters print what they would do and change nothing without --yes; the\n"+
		"preview runs the same checks and fails where --yes would. An action changes all it selects or\n"+
		"nothing. Filters that select no letter to change are not an error: there is nothing to do.\n"+
		"Exit codes: 0 done (nothing to do included), 1 failed or refused (nothing changed; an unknown\n"+
		"--queue or --id too), 2 bad command line.\n")
	for _, a := range dlqActions() {
		fmt.Fprintf(w, "\nseqbox dlq %s%s:\n", a.name, a.args)
		fs := dlqFlags(a, &dlqCLI{})
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func runDLQ(ctx context.Context, s streams, args []string) int {
	a, code, ok := pickAction(s, "dlq", dlqActions(), func(a dlqAction) string { return a.name }, dlqUsage, args)
	if !ok {
		return code
	}
	var c dlqCLI
	fs := dlqFlags(a, &c)
	positional, code, ok := parseFlags(s, fs, "dlq "+a.name, dlqUsage, args[1:])
	if !ok {
		return code
	}
	usageErr := func(format string, v ...any) int {
		fmt.Fprintf(s.stderr, "seqbox dlq %s: %s\n", a.name, fmt.Sprintf(format, v...))
		return ExitUsage
	}
	wantArgs := 0
	if a.name == "show" {
		wantArgs = 1
	}
	if len(positional) != wantArgs {
		return usageErr("want %d argument(s), got %d (see seqbox help dlq)", wantArgs, len(positional))
	}
	sel, filter, err := c.selection(a)
	if err != nil {
		return usageErr("%v", err)
	}
	switch {
	case a.name == "list" && c.limit < 1:
		return usageErr("--limit: want at least 1, got %d", c.limit)
	case c.after < 0:
		return usageErr("--after: want a dead-letter id, got %d", c.after)
	}
	if err := positiveDuration("older-than", c.olderThan); err != nil {
		return usageErr("%v", err)
	}
	var showID dialect.MessageID
	if a.name == "show" {
		if showID, err = seqbox.ParseMessageID(positional[0]); err != nil {
			return usageErr("%v", err)
		}
	}
	acc := accessRead
	if a.acts && c.yes {
		acc = accessWrite
	}
	ss, code := c.open(ctx, s, fs.Name(), acc)
	if ss == nil {
		return code
	}
	defer ss.close()
	if err := ss.checkQueue(ctx, c.queue); err != nil {
		fmt.Fprintf(s.stderr, "seqbox dlq %s: %v\n", a.name, err)
		return ExitFailure
	}
	admin, err := deadLetters(ctx, ss.db, ss.prefix)
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox dlq %s: %v\n", a.name, err)
		return ExitFailure
	}
	d := dlqRun{s: s, c: &c, a: a, admin: admin}
	switch a.name {
	case "list":
		err = d.list(ctx, sel, filter)
	case "count":
		err = d.count(ctx, sel, filter)
	case "show":
		err = d.show(ctx, showID)
	case "purge":
		err = d.purge(ctx, filter)
	default:
		err = d.act(ctx, sel, filter)
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox dlq %s: %v\n%s", a.name, err, nextStep(err))
		return ExitFailure
	}
	return ExitOK
}

// previewError is the error a preview found: what its --yes would fail
// with.
type previewError struct{ err error }

func (e previewError) Error() string { return "--yes would fail: " + e.err.Error() }
func (e previewError) Unwrap() error { return e.err }

// nextStep says what to do about an action's error.
func nextStep(err error) string {
	switch {
	case errors.Is(err, deadletter.ErrNoMatch):
		return "nothing was changed; check the filters with seqbox dlq list (only pending letters can be replayed, resolved or discarded)\n"
	case errors.Is(err, deadletter.ErrNotFound):
		return "nothing was changed; list the letters with seqbox dlq list\n"
	case errors.Is(err, deadletter.ErrWrongStatus):
		return "nothing was changed; only pending letters can be acted on (another operator may have acted on it): " +
			"see seqbox dlq list --status replayed,resolved,discarded\n"
	}
	return ""
}

// selection turns the flags into the API's selection and filter.
func (c *dlqCLI) selection(a dlqAction) (deadletter.Selection, deadletter.Filter, error) {
	var f deadletter.Filter
	f.Queue, f.PayloadType, f.ErrorContains, f.Headers = c.queue, c.payloadType, c.errorText, c.headers
	if c.partitions != "" {
		var err error
		if f.Partitions, err = parsePartitions(c.partitions); err != nil {
			return deadletter.Selection{}, f, err
		}
		if c.queue == "" {
			return deadletter.Selection{}, f, errors.New("--partition needs --queue")
		}
	}
	if c.statuses != "" {
		for _, st := range strings.Split(c.statuses, ",") {
			st = strings.TrimSpace(st)
			switch deadletter.Status(st) {
			case deadletter.StatusPending, deadletter.StatusReplayed, deadletter.StatusResolved, deadletter.StatusDiscarded:
				f.Statuses = append(f.Statuses, deadletter.Status(st))
			default:
				return deadletter.Selection{}, f, fmt.Errorf("--status: unknown status %q", st)
			}
		}
	}
	var err error
	if f.FailedFrom, err = parseWhen(c.failedFrom); err != nil {
		return deadletter.Selection{}, f, fmt.Errorf("--failed-from: %w", err)
	}
	if f.FailedTo, err = parseWhen(c.failedTo); err != nil {
		return deadletter.Selection{}, f, fmt.Errorf("--failed-to: %w", err)
	}
	if !f.FailedFrom.IsZero() && !f.FailedTo.IsZero() && !f.FailedFrom.Before(f.FailedTo) {
		return deadletter.Selection{}, f, errors.New("--failed-from must be before --failed-to")
	}
	if err := f.Validate(); err != nil {
		return deadletter.Selection{}, f, err
	}
	if a.name == "purge" {
		for _, st := range f.Statuses {
			if st != deadletter.StatusResolved && st != deadletter.StatusDiscarded {
				return deadletter.Selection{}, f, fmt.Errorf("--status: purge deletes only resolved or discarded letters, not %s", st)
			}
		}
	}
	if c.ids == "" {
		if a.acts && a.name != "purge" && len(f.Statuses) > 0 && !slices.Equal(f.Statuses, []deadletter.Status{deadletter.StatusPending}) {
			return deadletter.Selection{}, f, fmt.Errorf("--status: only pending letters can be %sed", strings.TrimSuffix(a.name, "e"))
		}
		return deadletter.Matching(f), f, nil
	}
	if f.Queue != "" || f.PayloadType != "" || len(f.Statuses) > 0 || c.failedFrom != "" || c.failedTo != "" {
		return deadletter.Selection{}, f, errors.New("give --id or filters, not both")
	}
	var ids []int64
	for _, p := range strings.Split(c.ids, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n < 1 {
			return deadletter.Selection{}, f, fmt.Errorf("--id: want dead-letter ids, got %q", c.ids)
		}
		if slices.Contains(ids, n) {
			return deadletter.Selection{}, f, fmt.Errorf("--id: %d given twice", n)
		}
		ids = append(ids, n)
	}
	return deadletter.IDs(ids...), f, nil
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%v is negative; give how long ago, e.g. %v", d, -d)
		}
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration ago, got %q", s)
	}
	return t, nil
}

type dlqRun struct {
	s     streams
	c     *dlqCLI
	a     dlqAction
	admin *seqbox.DeadLetters
	// cutoff is purge's: letters finished before it go.
	cutoff time.Time
}

func toJSON(l deadletter.Letter, full bool) LetterJSON {
	j := LetterJSON{ID: l.ID, Queue: l.Queue, Partition: l.Partition, Seq: l.Seq, MessageID: l.MessageID.String(),
		PayloadType: l.PayloadType, EnqueuedAt: utc(l.EnqueuedAt), FailedAt: utc(l.FailedAt), LastError: l.LastError,
		Attempts: l.Attempts, Status: string(l.Status), Note: l.Note}
	j.Key, j.KeyEncoding = bytesJSON([]byte(l.Key))
	if l.CompletedAt != nil {
		j.CompletedAt = utc(*l.CompletedAt)
	}
	if l.ReplayID != nil {
		j.ReplayID = l.ReplayID.String()
	}
	if full {
		j.Payload, j.PayloadEncoding = bytesJSON(l.Payload)
		j.Headers = l.Headers
	}
	return j
}

func lettersJSON(letters []deadletter.Letter, full bool) []LetterJSON {
	out := make([]LetterJSON, len(letters))
	for i, l := range letters {
		out[i] = toJSON(l, full)
	}
	return out
}

func (d *dlqRun) writeJSON(v any) error { return writeJSON(d.s.stdout, v) }

func (d *dlqRun) table(letters []deadletter.Letter) {
	tw := tabwriter.NewWriter(d.s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tPARTITION\tSEQ\tSTATUS\tATTEMPTS\tFAILED AT\tTYPE\tMESSAGE ID\tLAST ERROR")
	for _, l := range letters {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", l.ID, l.Queue, l.Partition, l.Seq, l.Status, l.Attempts,
			l.FailedAt.Format(time.RFC3339), l.PayloadType, l.MessageID, oneLine(l.LastError, 60))
	}
	_ = tw.Flush()
}

// oneLine shortens text to n runes on one line for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

func (d *dlqRun) list(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) error {
	page, err := d.pageOf(ctx, sel, f)
	if err != nil {
		return err
	}
	if d.c.asJSON {
		return d.writeJSON(DLQListJSON{Letters: lettersJSON(page.Letters, d.c.showPayloads), NextAfter: page.Next})
	}
	if len(page.Letters) == 0 {
		fmt.Fprintln(d.s.stdout, "no dead letter matches")
		return nil
	}
	d.table(page.Letters)
	if page.Next != 0 {
		fmt.Fprintf(d.s.stdout, "\nmore: --after %d\n", page.Next)
	}
	return nil
}

// pageOf lists one page, by ids (--id: every id must name a letter) or by
// the filters.
func (d *dlqRun) pageOf(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) (deadletter.Page, error) {
	if sel.IDs == nil {
		return d.admin.List(ctx, f, d.c.after, d.c.limit)
	}
	var out deadletter.Page
	for _, id := range sel.IDs {
		p, err := d.admin.List(ctx, deadletter.Filter{}, id-1, 1)
		if err != nil {
			return deadletter.Page{}, err
		}
		if len(p.Letters) != 1 || p.Letters[0].ID != id {
			return deadletter.Page{}, fmt.Errorf("%w: id %d", deadletter.ErrNotFound, id)
		}
		out.Letters = append(out.Letters, p.Letters[0])
	}
	return out, nil
}

func (d *dlqRun) count(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) error {
	var counts map[deadletter.Status]int64
	if sel.IDs != nil {
		page, err := d.pageOf(ctx, sel, f)
		if err != nil {
			return err
		}
		counts = map[deadletter.Status]int64{}
		for _, l := range page.Letters {
			counts[l.Status]++
		}
	} else {
		var err error
		if counts, err = d.admin.Count(ctx, f); err != nil {
			return err
		}
	}
	c := deadLetterCounts(counts)
	if d.c.asJSON {
		return d.writeJSON(c)
	}
	tw := tabwriter.NewWriter(d.s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tLETTERS")
	fmt.Fprintf(tw, "pending\t%d\nreplayed\t%d\nresolved\t%d\ndiscarded\t%d\ntotal\t%d\n", c.Pending, c.Replayed, c.Resolved, c.Discarded, c.Total)
	return tw.Flush()
}

func (d *dlqRun) show(ctx context.Context, id dialect.MessageID) error {
	l, err := d.admin.Get(ctx, id)
	if err != nil {
		return err
	}
	if d.c.asJSON {
		return d.writeJSON(toJSON(l, true))
	}
	w := d.s.stdout
	fmt.Fprintf(w, "dead letter %d: message %s\n", l.ID, l.MessageID)
	fmt.Fprintf(w, "queue %s, partition %d, seq %d, type %s\n", l.Queue, l.Partition, l.Seq, l.PayloadType)
	if l.Key != "" {
		fmt.Fprintf(w, "key %q\n", l.Key)
	}
	fmt.Fprintf(w, "status %s", l.Status)
	if l.CompletedAt != nil {
		fmt.Fprintf(w, " since %s", l.CompletedAt.Format(time.RFC3339))
	}
	if l.Note != "" {
		fmt.Fprintf(w, " (%s)", l.Note)
	}
	if l.ReplayID != nil {
		fmt.Fprintf(w, ", replayed as %s", l.ReplayID)
	}
	fmt.Fprintf(w, "\nenqueued %s, dead-lettered %s after %d attempt(s)\n", l.EnqueuedAt.Format(time.RFC3339), l.FailedAt.Format(time.RFC3339), l.Attempts)
	fmt.Fprintf(w, "last error: %s\n", l.LastError)
	keys := make([]string, 0, len(l.Headers))
	for k := range l.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "header %s: %s\n", k, l.Headers[k])
	}
	if utf8.Valid(l.Payload) {
		fmt.Fprintf(w, "payload (%d bytes):\n%s\n", len(l.Payload), l.Payload)
	} else {
		fmt.Fprintf(w, "payload (%d bytes, hex):\n%s\n", len(l.Payload), hex.EncodeToString(l.Payload))
	}
	return nil
}

// act runs replay, resolve or discard, or without --yes shows what it
// would change, after the same checks.
func (d *dlqRun) act(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) error {
	if !d.c.yes {
		return d.previewAct(ctx, sel, f)
	}
	var changed deadletter.Changed
	var err error
	switch d.a.name {
	case "replay":
		changed, err = d.admin.Replay(ctx, sel)
	case "resolve":
		changed, err = d.admin.Resolve(ctx, sel, d.c.note)
	case "discard":
		changed, err = d.admin.Discard(ctx, sel, d.c.note)
	}
	if errors.Is(err, deadletter.ErrNoMatch) && sel.IDs == nil {
		return d.nothing("no pending dead letter matches")
	}
	if err != nil {
		return err
	}
	return d.report(changed)
}

// previewAct shows what replay, resolve or discard would change: by ids,
// every id must name a pending letter (else --yes fails and so does the
// preview); by filter, the pending letters it matches.
func (d *dlqRun) previewAct(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) error {
	if sel.IDs != nil {
		page, err := d.pageOf(ctx, sel, f)
		if err != nil {
			return previewError{err}
		}
		for _, l := range page.Letters {
			if l.Status != deadletter.StatusPending {
				return previewError{&deadletter.StatusError{ID: l.ID, Status: l.Status, Action: d.a.name}}
			}
		}
		return d.preview(int64(len(page.Letters)), page.Letters, fmt.Sprintf("would %s %d dead letter(s)", d.a.name, len(page.Letters)))
	}
	f.Statuses = []deadletter.Status{deadletter.StatusPending}
	counts, err := d.admin.Count(ctx, f)
	if err != nil {
		return err
	}
	n := counts[deadletter.StatusPending]
	if n == 0 {
		return d.nothing("no pending dead letter matches")
	}
	page, err := d.admin.List(ctx, f, 0, deadletter.DefaultPageSize)
	if err != nil {
		return err
	}
	return d.preview(n, page.Letters, fmt.Sprintf("would %s %d dead letter(s)", d.a.name, n))
}

// purge deletes, or without --yes shows, the resolved and discarded
// letters the filter matches that were finished before the cutoff.
func (d *dlqRun) purge(ctx context.Context, f deadletter.Filter) error {
	cutoff := time.Now().Add(-d.c.olderThan)
	d.cutoff = cutoff
	none := fmt.Sprintf("no resolved or discarded dead letter finished before %s matches", cutoff.UTC().Format(time.RFC3339))
	if d.c.yes {
		changed, err := d.admin.Purge(ctx, f, cutoff)
		if errors.Is(err, deadletter.ErrNoMatch) {
			return d.nothing(none)
		}
		if err != nil {
			return err
		}
		return d.report(changed)
	}
	if len(f.Statuses) == 0 {
		f.Statuses = []deadletter.Status{deadletter.StatusResolved, deadletter.StatusDiscarded}
	}
	// Purge's own condition (completed_at before the cutoff) over every
	// page: the filter alone selects letters the cutoff keeps.
	var (
		n     int64
		first []deadletter.Letter
	)
	for after := int64(0); ; {
		page, err := d.admin.List(ctx, f, after, 1000)
		if err != nil {
			return err
		}
		for _, l := range page.Letters {
			if l.CompletedAt != nil && l.CompletedAt.Before(cutoff) {
				n++
				if len(first) < deadletter.DefaultPageSize {
					first = append(first, l)
				}
			}
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if n == 0 {
		return d.nothing(none)
	}
	return d.preview(n, first, fmt.Sprintf("would delete %d dead letter(s) resolved or discarded before %s", n, cutoff.UTC().Format(time.RFC3339)))
}

// nothing reports an action with nothing to change: a success.
func (d *dlqRun) nothing(why string) error {
	if d.c.asJSON {
		return d.writeJSON(DLQActionJSON{Action: d.a.name, DryRun: !d.c.yes, Letters: []LetterJSON{}, Changed: []int64{},
			CompletedBefore: utc(d.cutoff)})
	}
	_, err := fmt.Fprintf(d.s.stdout, "%s: nothing to %s\n", why, d.a.name)
	return err
}

// preview prints the n letters an action would change, under headline,
// the first of them listed.
func (d *dlqRun) preview(n int64, letters []deadletter.Letter, headline string) error {
	if d.c.asJSON {
		return d.writeJSON(DLQActionJSON{Action: d.a.name, DryRun: true, Count: n, Letters: lettersJSON(letters, false),
			More: n > int64(len(letters)), Changed: []int64{}, CompletedBefore: utc(d.cutoff)})
	}
	fmt.Fprintf(d.s.stdout, "%s (nothing changed; add --yes to do it):\n\n", headline)
	d.table(letters)
	if more := n - int64(len(letters)); more > 0 {
		fmt.Fprintf(d.s.stdout, "\n… and %d more\n", more)
	}
	return nil
}

func (d *dlqRun) report(changed deadletter.Changed) error {
	if d.c.asJSON {
		out := DLQActionJSON{Action: d.a.name, Count: int64(len(changed.IDs)), Letters: []LetterJSON{}, Changed: changed.IDs,
			CompletedBefore: utc(d.cutoff)}
		if out.Changed == nil {
			out.Changed = []int64{}
		}
		for _, id := range changed.ReplayIDs {
			out.ReplayIDs = append(out.ReplayIDs, id.String())
		}
		return d.writeJSON(out)
	}
	past := map[string]string{"replay": "replayed", "resolve": "resolved", "discard": "discarded", "purge": "purged"}[d.a.name]
	fmt.Fprintf(d.s.stdout, "%s %d dead letter(s)\n", past, len(changed.IDs))
	tw := tabwriter.NewWriter(d.s.stdout, 0, 0, 2, ' ', 0)
	if changed.ReplayIDs != nil {
		fmt.Fprintln(tw, "ID\tREPLAY MESSAGE ID")
		for i, id := range changed.IDs {
			fmt.Fprintf(tw, "%d\t%s\n", id, changed.ReplayIDs[i])
		}
	} else {
		fmt.Fprintln(tw, "ID")
		for _, id := range changed.IDs {
			fmt.Fprintf(tw, "%d\n", id)
		}
	}
	return tw.Flush()
}
