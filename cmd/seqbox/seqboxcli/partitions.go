package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
)

// partitionsAction is one `seqbox partitions` subcommand.
type partitionsAction struct {
	name, summary string
	acts          bool // changes partitions: previews without --yes
}

func partitionsActions() []partitionsAction {
	return []partitionsAction{
		{name: "list", summary: "list parked partitions with the error of the head they stopped at"},
		{name: "resume", summary: "retry the head of parked partitions now, with fresh attempts (--yes)", acts: true},
		{name: "skip", summary: "dead-letter the head of parked partitions and deliver the rest (--yes)", acts: true},
	}
}

type partitionsCLI struct {
	dbFlags
	queue      string
	partitions string
	all, yes   bool
}

func partitionsFlags(a partitionsAction, c *partitionsCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox partitions "+a.name, flag.ContinueOnError)
	c.register(fs)
	if !a.acts {
		fs.StringVar(&c.queue, "queue", "", "only this queue")
		return fs
	}
	fs.StringVar(&c.queue, "queue", "", "the queue (required)")
	fs.StringVar(&c.partitions, "partition", "", "partition numbers, comma-separated")
	fs.BoolVar(&c.all, "all", false, "every parked partition of --queue (instead of --partition)")
	fs.BoolVar(&c.yes, "yes", false, "do it (without it, print what would change)")
	return fs
}

func partitionsUsage(w io.Writer) {
	fmt.Fprint(w, "usage: seqbox partitions <action> --dsn DSN [flags]\n\n"+
		"A queue with the Park failure policy (processor.OnFailure(processor.Park)) stops a partition at a\n"+
		"head message that failed MaxAttempts times: nothing behind it is delivered until an operator\n"+
		"resumes the partition (the head is retried now) or skips the head (it goes to dead letters).\n\nActions:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range partitionsActions() {
		fmt.Fprintf(tw, "  %s\t%s\n", a.name, a.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nresume and skip print what they would do and change nothing without --yes. Each partition is\n"+
		"one transaction; a partition another operator resumed or skipped first is reported, not changed.\n"+
		"Exit codes: 0 done, 1 failed (for any partition), 2 bad command line.\n")
	for _, a := range partitionsActions() {
		fmt.Fprintf(w, "\nseqbox partitions %s:\n", a.name)
		fs := partitionsFlags(a, &partitionsCLI{})
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func runPartitions(ctx context.Context, s streams, args []string) int {
	a, code, ok := pickAction(s, "partitions", partitionsActions(), func(a partitionsAction) string { return a.name }, partitionsUsage, args)
	if !ok {
		return code
	}
	var c partitionsCLI
	fs := partitionsFlags(a, &c)
	usageErr := func(format string, v ...any) int {
		fmt.Fprintf(s.stderr, "seqbox partitions %s: %s\n", a.name, fmt.Sprintf(format, v...))
		return ExitUsage
	}
	fs.SetOutput(s.stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return ExitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	numbers, err := c.targets(a)
	if err != nil {
		return usageErr("%v", err)
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
	admin := adm.Partitions()
	parked, err := admin.Parked(ctx, c.queue)
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox partitions %s: %v\n(is the schema there? seqbox migrate --status --dsn …)\n", a.name, err)
		return ExitFailure
	}
	if !a.acts {
		if err := printParked(s.stdout, c.asJSON, parked); err != nil {
			fmt.Fprintf(s.stderr, "seqbox partitions %s: %v\n", a.name, err)
			return ExitFailure
		}
		return ExitOK
	}
	if c.all {
		numbers = nil
		for _, p := range parked {
			numbers = append(numbers, p.Partition)
		}
		if len(numbers) == 0 {
			fmt.Fprintf(s.stderr, "seqbox partitions %s: queue %s has no parked partition; nothing to do\n", a.name, c.queue)
			return ExitFailure
		}
	}
	if !c.yes {
		return c.preview(s, a, numbers, parked)
	}
	return c.act(ctx, s, a, admin, numbers)
}

// targets reads --partition or --all of an acting command.
func (c *partitionsCLI) targets(a partitionsAction) ([]int, error) {
	if !a.acts {
		return nil, nil
	}
	if c.queue == "" {
		return nil, errors.New("--queue is required")
	}
	if c.all == (c.partitions != "") {
		return nil, errors.New("give --partition or --all (one of them)")
	}
	if c.partitions == "" {
		return nil, nil
	}
	return parsePartitions(c.partitions)
}

// parkedJSON is a parked partition as --json prints it.
type parkedJSON struct {
	Queue     string    `json:"queue"`
	Partition int       `json:"partition"`
	HeadSeq   int64     `json:"head_seq"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	ParkedAt  time.Time `json:"parked_at"`
}

func printParked(w io.Writer, asJSON bool, parked []seqbox.Parked) error {
	if asJSON {
		out := make([]parkedJSON, len(parked))
		for i, p := range parked {
			out[i] = parkedJSON{Queue: p.Queue, Partition: p.Partition, HeadSeq: p.HeadSeq, Attempts: p.Attempts,
				LastError: p.LastError, ParkedAt: p.ParkedAt}
		}
		return writeJSON(w, map[string]any{"parked": out})
	}
	if len(parked) == 0 {
		_, err := fmt.Fprintln(w, "no parked partitions")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITION\tHEAD SEQ\tATTEMPTS\tPARKED AT\tLAST ERROR")
	for _, p := range parked {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", p.Queue, p.Partition, p.HeadSeq, p.Attempts,
			p.ParkedAt.Format(time.RFC3339), oneLine(p.LastError, 60))
	}
	return tw.Flush()
}

// preview prints what resume or skip would do; a named partition that is
// not parked makes it fail, as the action would.
func (c *partitionsCLI) preview(s streams, a partitionsAction, numbers []int, parked []seqbox.Parked) int {
	code := ExitOK
	for _, n := range numbers {
		i := slices.IndexFunc(parked, func(p seqbox.Parked) bool { return p.Partition == n })
		if i < 0 {
			fmt.Fprintf(s.stderr, "%s/%d is not parked (see seqbox partitions list)\n", c.queue, n)
			code = ExitFailure
			continue
		}
		p := parked[i]
		what := "retry its head (seq %d) now, with fresh attempts"
		if a.name == "skip" {
			what = "dead-letter its head (seq %d) and deliver the rest"
		}
		fmt.Fprintf(s.stdout, "would %s %s/%d: "+what+"; it failed %d time(s): %s\n", a.name, c.queue, n, p.HeadSeq,
			p.Attempts, oneLine(p.LastError, 80))
	}
	fmt.Fprintln(s.stdout, "nothing changed: add --yes to do it")
	return code
}

func (c *partitionsCLI) act(ctx context.Context, s streams, a partitionsAction, admin *seqbox.Partitions, numbers []int) int {
	type result struct {
		Queue     string `json:"queue"`
		Partition int    `json:"partition"`
		HeadSeq   int64  `json:"head_seq,omitempty"`
		MessageID string `json:"dead_lettered_message_id,omitempty"`
		Error     string `json:"error,omitempty"`
	}
	code := ExitOK
	var results []result
	for _, n := range numbers {
		r := result{Queue: c.queue, Partition: n}
		var err error
		if a.name == "resume" {
			var p seqbox.Parked
			p, err = admin.Resume(ctx, c.queue, n)
			r.HeadSeq = p.HeadSeq
		} else {
			var sk seqbox.Skipped
			sk, err = admin.Skip(ctx, c.queue, n)
			r.HeadSeq = sk.HeadSeq
			if sk.MessageID != (dialect.MessageID{}) {
				r.MessageID = sk.MessageID.String()
			}
		}
		if err != nil {
			code, r.Error = ExitFailure, err.Error()
			fmt.Fprintf(s.stderr, "seqbox partitions %s: %v\n%s", a.name, err, partitionsNextStep(err))
		}
		results = append(results, r)
		if !c.asJSON && err == nil {
			if a.name == "resume" {
				fmt.Fprintf(s.stdout, "resumed %s/%d: its head (seq %d) is retried now\n", c.queue, n, r.HeadSeq)
			} else {
				fmt.Fprintf(s.stdout, "skipped %s/%d: its head (seq %d, message %s) is a dead letter; the rest follows\n",
					c.queue, n, r.HeadSeq, r.MessageID)
			}
		}
	}
	if c.asJSON {
		if err := writeJSON(s.stdout, map[string]any{"action": a.name, "results": results}); err != nil {
			return ExitFailure
		}
	}
	return code
}

func partitionsNextStep(err error) string {
	switch {
	case errors.Is(err, seqbox.ErrNotParked):
		return "nothing was changed for it; another operator may have acted first: see seqbox partitions list\n"
	case errors.Is(err, seqbox.ErrUnknownPartition):
		return "nothing was changed for it; check the queue and partition with seqbox status --partitions\n"
	}
	return ""
}
