package seqboxcli

import (
	"context"
	"encoding/base64"
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
	}
	switch a.name {
	case "list":
		fs.Int64Var(&c.after, "after", 0, "list ids above this (the next page's --after is printed)")
		fs.IntVar(&c.limit, "limit", deadletter.DefaultPageSize, "letters per page")
		fs.BoolVar(&c.showPayloads, "payloads", false, "with --json: include payloads (base64) and headers")
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
	fmt.Fprint(w, "\nActions that change letters print what they would do and change nothing without --yes.\n"+
		"An action changes all it selects or nothing. Exit codes: 0 done, 1 failed (nothing changed), 2 bad command line.\n")
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
	fs.SetOutput(s.stderr)
	positional, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return ExitUsage
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
	var showID dialect.MessageID
	if a.name == "show" {
		if showID, err = seqbox.ParseMessageID(positional[0]); err != nil {
			return usageErr("%v", err)
		}
	}
	db, code := c.connect(ctx, s, fs.Name())
	if db == nil {
		return code
	}
	defer func() { _ = db.Close() }()
	adm, err := seqbox.NewAdmin(ctx, db, c.prefix)
	if err != nil {
		return usageErr("%v", err)
	}
	admin := adm.DeadLetters()
	d := dlqRun{s: s, c: &c, a: a, admin: admin}
	switch a.name {
	case "list":
		err = d.list(ctx, filter)
	case "count":
		err = d.count(ctx, filter)
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

// parseInterleaved parses flags that may come before or after the
// positional arguments (seqbox dlq show <id> --dsn …), which flag.Parse
// alone stops at.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// nextStep says what to do about an action's error.
func nextStep(err error) string {
	switch {
	case errors.Is(err, deadletter.ErrNoMatch):
		return "nothing was changed; check the filters with seqbox dlq list (only pending letters can be replayed, resolved or discarded)\n"
	case errors.Is(err, deadletter.ErrNotFound):
		return "nothing was changed; list the letters with seqbox dlq list\n"
	case errors.Is(err, deadletter.ErrWrongStatus):
		return "nothing was changed; another operator may have acted on it: see seqbox dlq list --status replayed,resolved,discarded\n"
	}
	return ""
}

// selection turns the flags into the API's selection and filter.
func (c *dlqCLI) selection(a dlqAction) (deadletter.Selection, deadletter.Filter, error) {
	var f deadletter.Filter
	f.Queue, f.PayloadType = c.queue, c.payloadType
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
		ids = append(ids, n)
	}
	return deadletter.IDs(ids...), f, nil
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
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
}

// letterJSON is a letter as --json prints it.
type letterJSON struct {
	ID          int64             `json:"id"`
	Queue       string            `json:"queue"`
	Partition   int               `json:"partition"`
	Seq         int64             `json:"seq"`
	MessageID   string            `json:"message_id"`
	Key         []byte            `json:"key,omitempty"` // base64: a key is bytes
	PayloadType string            `json:"payload_type"`
	Payload     []byte            `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	EnqueuedAt  time.Time         `json:"enqueued_at"`
	FailedAt    time.Time         `json:"failed_at"`
	LastError   string            `json:"last_error"`
	Attempts    int               `json:"attempts"`
	Status      string            `json:"status"`
	Note        string            `json:"note,omitempty"`
	CompletedAt *time.Time        `json:"completed_at,omitempty"`
	ReplayID    string            `json:"replay_id,omitempty"`
}

func toJSON(l deadletter.Letter, full bool) letterJSON {
	j := letterJSON{ID: l.ID, Queue: l.Queue, Partition: l.Partition, Seq: l.Seq, MessageID: l.MessageID.String(), Key: []byte(l.Key),
		PayloadType: l.PayloadType, EnqueuedAt: l.EnqueuedAt, FailedAt: l.FailedAt, LastError: l.LastError,
		Attempts: l.Attempts, Status: string(l.Status), Note: l.Note, CompletedAt: l.CompletedAt}
	if l.ReplayID != nil {
		j.ReplayID = l.ReplayID.String()
	}
	if full {
		j.Payload, j.Headers = l.Payload, l.Headers
	}
	return j
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

func (d *dlqRun) list(ctx context.Context, f deadletter.Filter) error {
	page, err := d.pageOf(ctx, f)
	if err != nil {
		return err
	}
	if d.c.asJSON {
		out := struct {
			Letters []letterJSON `json:"letters"`
			Next    int64        `json:"next_after,omitempty"`
		}{Letters: []letterJSON{}, Next: page.Next}
		for _, l := range page.Letters {
			out.Letters = append(out.Letters, toJSON(l, d.c.showPayloads))
		}
		return d.writeJSON(out)
	}
	d.table(page.Letters)
	if page.Next != 0 {
		fmt.Fprintf(d.s.stdout, "\nmore: --after %d\n", page.Next)
	}
	return nil
}

// pageOf lists one page, by ids (--id) or by the filters.
func (d *dlqRun) pageOf(ctx context.Context, f deadletter.Filter) (deadletter.Page, error) {
	sel, _, err := d.c.selection(d.a)
	if err != nil {
		return deadletter.Page{}, err
	}
	if sel.IDs == nil {
		return d.admin.List(ctx, f, d.c.after, d.c.limit)
	}
	var out deadletter.Page
	for _, id := range sel.IDs {
		p, err := d.admin.List(ctx, deadletter.Filter{}, id-1, 1)
		if err != nil {
			return deadletter.Page{}, err
		}
		if len(p.Letters) == 1 && p.Letters[0].ID == id {
			out.Letters = append(out.Letters, p.Letters[0])
		}
	}
	return out, nil
}

func (d *dlqRun) count(ctx context.Context, f deadletter.Filter) error {
	counts, err := d.admin.Count(ctx, f)
	if err != nil {
		return err
	}
	if d.c.asJSON {
		out := map[string]int64{}
		for st, n := range counts {
			out[string(st)] = n
		}
		return d.writeJSON(out)
	}
	tw := tabwriter.NewWriter(d.s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tLETTERS")
	var total int64
	for _, st := range []deadletter.Status{deadletter.StatusPending, deadletter.StatusReplayed, deadletter.StatusResolved, deadletter.StatusDiscarded} {
		fmt.Fprintf(tw, "%s\t%d\n", st, counts[st])
		total += counts[st]
	}
	fmt.Fprintf(tw, "total\t%d\n", total)
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
		fmt.Fprintf(w, "payload (%d bytes, base64):\n%s\n", len(l.Payload), base64.StdEncoding.EncodeToString(l.Payload))
	}
	return nil
}

// act runs replay, resolve or discard, or without --yes shows what it
// would change.
func (d *dlqRun) act(ctx context.Context, sel deadletter.Selection, f deadletter.Filter) error {
	if !d.c.yes {
		if sel.IDs == nil {
			f.Statuses = []deadletter.Status{deadletter.StatusPending}
		}
		return d.preview(ctx, f, fmt.Sprintf("would %s these letters", d.a.name))
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
	if err != nil {
		return err
	}
	return d.report(changed)
}

func (d *dlqRun) purge(ctx context.Context, f deadletter.Filter) error {
	cutoff := time.Now().Add(-d.c.olderThan)
	if !d.c.yes {
		if len(f.Statuses) == 0 {
			f.Statuses = []deadletter.Status{deadletter.StatusResolved, deadletter.StatusDiscarded}
		}
		return d.preview(ctx, f, fmt.Sprintf("would delete those of these letters finished before %s", cutoff.Format(time.RFC3339)))
	}
	changed, err := d.admin.Purge(ctx, f, cutoff)
	if err != nil {
		return err
	}
	return d.report(changed)
}

// preview prints the first page of what an action selects.
func (d *dlqRun) preview(ctx context.Context, f deadletter.Filter, what string) error {
	d.c.limit = deadletter.DefaultPageSize
	page, err := d.pageOf(ctx, f)
	if err != nil {
		return err
	}
	if d.c.asJSON {
		out := struct {
			DryRun  bool         `json:"dry_run"`
			Letters []letterJSON `json:"letters"`
			More    bool         `json:"more"`
		}{DryRun: true, Letters: []letterJSON{}, More: page.Next != 0}
		for _, l := range page.Letters {
			out.Letters = append(out.Letters, toJSON(l, false))
		}
		return d.writeJSON(out)
	}
	fmt.Fprintf(d.s.stdout, "%s (nothing changed; add --yes to do it):\n\n", what)
	d.table(page.Letters)
	if page.Next != 0 {
		fmt.Fprintf(d.s.stdout, "\n… and more (seqbox dlq count shows how many)\n")
	}
	return nil
}

func (d *dlqRun) report(changed deadletter.Changed) error {
	if d.c.asJSON {
		out := struct {
			Changed   []int64  `json:"changed"`
			ReplayIDs []string `json:"replay_ids,omitempty"`
		}{Changed: changed.IDs}
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
