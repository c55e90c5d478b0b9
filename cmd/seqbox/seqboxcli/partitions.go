package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
)

// partitionsAction is one `seqbox partitions` subcommand.
type partitionsAction struct {
	name, summary string
	acts          bool // changes partitions: previews without --yes
	// all is the state --all selects.
	all seqbox.State
}

func partitionsActions() []partitionsAction {
	return []partitionsAction{
		{name: "list", summary: "list retrying and parked partitions with the error of their head"},
		{name: "resume", summary: "retry the head of parked partitions now, with fresh attempts (--yes)", acts: true, all: seqbox.StateParked},
		{name: "retry", summary: "retry the head of retrying partitions now instead of at its retry time, keeping its attempt count (--yes)",
			acts: true, all: seqbox.StateRetrying},
		{name: "skip", summary: "dead-letter the head of parked or retrying partitions and deliver the rest (--yes)", acts: true, all: seqbox.StateParked},
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
	fs.BoolVar(&c.all, "all", false, fmt.Sprintf("every %s partition of --queue (instead of --partition)", a.all))
	fs.BoolVar(&c.yes, "yes", false, "do it (without it, print what would change)")
	return fs
}

func partitionsUsage(w io.Writer) {
	fmt.Fprint(w, "usage: seqbox partitions <action> --dsn DSN [flags]\n\n"+
		"A partition whose head message failed is retrying: the head is retried after a backoff, and\n"+
		"under the DeadLetter policy it becomes a dead letter after MaxAttempts. A queue with the Park\n"+
		"policy (processor.OnFailure(processor.Park)) parks the partition instead: nothing behind the\n"+
		"head is delivered until an operator resumes the partition (the head is retried now) or skips\n"+
		"the head (it goes to dead letters). retry and skip refuse a partition whose head is being\n"+
		"delivered at that moment.\n\nActions:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range partitionsActions() {
		fmt.Fprintf(tw, "  %s\t%s\n", a.name, a.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nresume, retry and skip print what they would do and change nothing without --yes; the preview\n"+
		"runs the same checks and fails where --yes would. Each partition is one transaction; a partition\n"+
		"another operator acted on first is reported, not changed. skip --all takes the parked partitions;\n"+
		"name a retrying one with --partition.\n"+
		"Exit codes: 0 done (nothing to do included), 1 failed or refused (for any partition; an unknown\n"+
		"--queue too), 2 bad command line.\n")
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
	name := "seqbox partitions " + a.name
	fail := func(err error) int {
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		return ExitFailure
	}
	if code, ok := noArgs(s, fs, "partitions "+a.name, partitionsUsage, args[1:]); !ok {
		return code
	}
	numbers, err := c.targets(a)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	acc := accessRead
	if c.yes {
		acc = accessWrite
	}
	ss, code := c.open(ctx, s, name, acc)
	if ss == nil {
		return code
	}
	defer ss.close()
	if err := ss.checkQueue(ctx, c.queue); err != nil {
		return fail(err)
	}
	admin, err := partitionsAdmin(ctx, ss.db, ss.prefix)
	if err != nil {
		return fail(err)
	}
	failing, err := admin.Failing(ctx, c.queue)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n%s", name, err, schemaHint)
		return ExitFailure
	}
	if !a.acts {
		if err := printFailing(s.stdout, c.asJSON, failing); err != nil {
			return fail(err)
		}
		return ExitOK
	}
	if c.all {
		numbers = nil
		for _, p := range failing {
			if p.State == a.all {
				numbers = append(numbers, p.Partition)
			}
		}
		if len(numbers) == 0 {
			if c.asJSON {
				if err := writeJSON(s.stdout, PartitionsActionJSON{Action: a.name, DryRun: !c.yes, Results: []PartitionResultJSON{}}); err != nil {
					return fail(err)
				}
				return ExitOK
			}
			fmt.Fprintf(s.stdout, "queue %s has no %s partition: nothing to do\n", c.queue, a.all)
			return ExitOK
		}
	}
	return c.run(ctx, s, a, admin, numbers)
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

func printFailing(w io.Writer, asJSON bool, list []seqbox.PartitionState) error {
	if asJSON {
		out := PartitionsListJSON{Partitions: make([]PartitionJSON, len(list))}
		for i, p := range list {
			out.Partitions[i] = PartitionJSON{Queue: p.Queue, Partition: p.Partition, State: string(p.State), HeadSeq: p.HeadSeq,
				Attempts: p.Attempts, LastError: p.LastError, NextAttemptAt: utc(p.NextAttemptAt), ParkedAt: utc(p.ParkedAt),
				InFlight: p.InFlight}
		}
		return writeJSON(w, out)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no retrying or parked partitions")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITION\tSTATE\tHEAD SEQ\tATTEMPTS\tSINCE / NEXT TRY\tLAST ERROR")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", p.Queue, p.Partition, stateText(p), p.HeadSeq, p.Attempts,
			when(p), oneLine(p.LastError, 60))
	}
	return tw.Flush()
}

func stateText(p seqbox.PartitionState) string {
	if p.InFlight {
		return string(p.State) + " (delivering)"
	}
	return string(p.State)
}

// when is a parked partition's parking time or a retrying one's next try.
func when(p seqbox.PartitionState) string {
	switch {
	case !p.ParkedAt.IsZero():
		return "parked " + p.ParkedAt.UTC().Format(time.RFC3339)
	case !p.NextAttemptAt.IsZero():
		return "next " + p.NextAttemptAt.UTC().Format(time.RFC3339)
	case p.State == seqbox.StateRetrying:
		return "due now"
	}
	return "-"
}

// run previews (without --yes) or does the action on each partition. A
// preview reads each partition's state and runs the action's own check
// (seqbox.PartitionState.Check), so it fails where --yes would.
func (c *partitionsCLI) run(ctx context.Context, s streams, a partitionsAction, admin *seqbox.Partitions, numbers []int) int {
	name := "seqbox partitions " + a.name
	code, acting := ExitOK, 0
	out := PartitionsActionJSON{Action: a.name, DryRun: !c.yes, Results: []PartitionResultJSON{}}
	for _, n := range numbers {
		r := PartitionResultJSON{Queue: c.queue, Partition: n}
		st, err := admin.State(ctx, c.queue, n)
		var pe *seqbox.PartitionError
		if errors.As(err, &pe) {
			pe.Action = a.name // as the action itself reports it
		}
		if err == nil {
			r.State, r.HeadSeq, r.Attempts, r.LastError = string(st.State), st.HeadSeq, st.Attempts, st.LastError
			err = st.Check(a.name)
		}
		if err == nil && c.yes {
			err = c.act(ctx, admin, a, n, &r)
		}
		if err != nil {
			code, r.Error = ExitFailure, err.Error()
			what := ""
			if !c.yes {
				what = "--yes would fail: "
			}
			fmt.Fprintf(s.stderr, "%s: %s%v\n%s", name, what, err, partitionsNextStep(err, st))
		} else {
			acting++
			if !c.asJSON {
				fmt.Fprintln(s.stdout, describe(a.name, c.yes, c.queue, n, st, r))
			}
		}
		out.Results = append(out.Results, r)
	}
	if c.asJSON {
		if err := writeJSON(s.stdout, out); err != nil {
			fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
			return ExitFailure
		}
	} else if !c.yes && acting > 0 {
		fmt.Fprintln(s.stdout, "nothing changed: add --yes to do it")
	}
	return code
}

// act does the action on one partition, recording the outcome in r.
func (c *partitionsCLI) act(ctx context.Context, admin *seqbox.Partitions, a partitionsAction, n int, r *PartitionResultJSON) error {
	switch a.name {
	case seqbox.ActionResume:
		p, err := admin.Resume(ctx, c.queue, n)
		r.State, r.HeadSeq, r.Attempts, r.LastError = string(seqbox.StateParked), p.HeadSeq, p.Attempts, p.LastError
		return err
	case seqbox.ActionRetry:
		p, err := admin.RetryNow(ctx, c.queue, n)
		r.State, r.HeadSeq, r.Attempts, r.LastError = string(p.State), p.HeadSeq, p.Attempts, p.LastError
		return err
	default:
		sk, err := admin.Skip(ctx, c.queue, n)
		r.State, r.HeadSeq, r.Attempts, r.LastError = string(sk.State), sk.HeadSeq, sk.Attempts, sk.LastError
		if sk.MessageID != (dialect.MessageID{}) {
			r.DeadLetteredMessageID = sk.MessageID.String()
		}
		return err
	}
}

// describe is the line a preview or a done action prints for a partition.
func describe(action string, done bool, queue string, n int, st seqbox.PartitionState, r PartitionResultJSON) string {
	failed := fmt.Sprintf("it failed %d time(s): %s", st.Attempts, oneLine(st.LastError, 80))
	switch {
	case action == seqbox.ActionResume && done:
		return fmt.Sprintf("resumed %s/%d: its head (seq %d) is retried now", queue, n, r.HeadSeq)
	case action == seqbox.ActionResume:
		return fmt.Sprintf("would resume %s/%d: retry its head (seq %d) now, with fresh attempts; %s", queue, n, st.HeadSeq, failed)
	case action == seqbox.ActionRetry && done:
		return fmt.Sprintf("retrying %s/%d now: its head (seq %d) is due, after %d failed attempt(s)", queue, n, r.HeadSeq, r.Attempts)
	case action == seqbox.ActionRetry:
		next := "due now"
		if !st.NextAttemptAt.IsZero() {
			next = "next try " + st.NextAttemptAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("would retry %s/%d now (%s): its head (seq %d) keeps its attempt count; %s", queue, n, next, st.HeadSeq, failed)
	case done:
		return fmt.Sprintf("skipped %s/%d (%s): its head (seq %d, message %s) is a dead letter; the rest follows",
			queue, n, r.State, r.HeadSeq, r.DeadLetteredMessageID)
	default:
		return fmt.Sprintf("would skip %s/%d (%s): dead-letter its head (seq %d) and deliver the rest; %s", queue, n, st.State, st.HeadSeq, failed)
	}
}

func partitionsNextStep(err error, st seqbox.PartitionState) string {
	switch {
	case errors.Is(err, seqbox.ErrPartitionBusy):
		return "nothing was changed for it; its head is being delivered right now: see seqbox partitions list, and try again when it is done\n"
	case errors.Is(err, seqbox.ErrNotRetrying) && st.State == seqbox.StateParked:
		return "nothing was changed for it; it is parked: seqbox partitions resume retries its head\n"
	case errors.Is(err, seqbox.ErrNotParked) && st.State == seqbox.StateRetrying:
		return "nothing was changed for it; it is retrying, not parked: seqbox partitions retry retries its head now\n"
	case errors.Is(err, seqbox.ErrNotParked), errors.Is(err, seqbox.ErrNotRetrying):
		return "nothing was changed for it; its head has not failed, or another operator acted first: see seqbox partitions list\n"
	case errors.Is(err, seqbox.ErrUnknownPartition):
		return "nothing was changed for it; check the queue and partition with seqbox status --partitions\n"
	}
	return ""
}
