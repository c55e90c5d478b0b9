package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/seqbox/seqbox/outbox"
)

type purgeCLI struct {
	dbFlags
	queue   string
	headers map[string]string
	yes     bool
}

func purgeFlags(c *purgeCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox purge", flag.ContinueOnError)
	c.register(fs)
	fs.StringVar(&c.queue, "queue", "", "the queue (required)")
	headerFlag(fs, &c.headers, "name=value a message's headers must hold (required; repeat: all must match)")
	fs.BoolVar(&c.yes, "yes", false, "do it (without it, print what would be removed)")
	return fs
}

// headerFlag registers --header name=value, repeatable, into *headers.
func headerFlag(fs *flag.FlagSet, headers *map[string]string, usage string) {
	fs.Func("header", usage, func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return errors.New("want name=value")
		}
		if _, dup := (*headers)[name]; dup {
			return fmt.Errorf("header %q given twice", name)
		}
		if *headers == nil {
			*headers = map[string]string{}
		}
		(*headers)[name] = value
		return nil
	})
}

func purgeUsage(w io.Writer) {
	fmt.Fprint(w, "usage: seqbox purge --dsn DSN --queue QUEUE --header name=value [--header …] [--yes] [--json]\n\n"+
		"Removes the queue's messages not yet delivered whose headers match, from both stages: those not\n"+
		"sequenced yet are deleted; those with a seq become tombstones that the processors pass over without\n"+
		"a handler call (the partition's seqs stay gap-free). Safe while the pipeline runs: a matching message\n"+
		"being delivered at that moment is left to its delivery, and the purge waits for it. Dead letters are\n"+
		"not touched (seqbox dlq). Without --yes it counts what it would remove and changes nothing.\n"+
		"Exit codes: 0 done (nothing to purge included), 1 failed (an unknown --queue too), 2 bad command line.\n\n")
	fs := purgeFlags(&purgeCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runPurge(ctx context.Context, s streams, args []string) int {
	var c purgeCLI
	fs := purgeFlags(&c)
	usageErr := func(format string, v ...any) int {
		fmt.Fprintf(s.stderr, "seqbox purge: %s\n", fmt.Sprintf(format, v...))
		return ExitUsage
	}
	if code, ok := noArgs(s, fs, "purge", purgeUsage, args); !ok {
		return code
	}
	switch {
	case c.queue == "":
		return usageErr("--queue is required")
	case len(c.headers) == 0:
		return usageErr("--header is required (a purge of every message is not offered)")
	}
	filter := outbox.PurgeFilter{Headers: c.headers}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	// Even the preview: on SQLite it counts in a write transaction (the
	// writer lock holds the pipeline still while it counts). An existing
	// file all the same: nothing is created.
	ss, code := c.open(ctx, s, fs.Name(), accessWrite)
	if ss == nil {
		return code
	}
	defer ss.close()
	if err := ss.checkQueue(ctx, c.queue); err != nil {
		fmt.Fprintf(s.stderr, "seqbox purge: %v\nnothing was changed\n", err)
		return ExitFailure
	}
	adm, err := admin(ctx, ss.db, ss.prefix)
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox purge: %v\n", err)
		return ExitFailure
	}
	purge := adm.PreviewPurge
	if c.yes {
		purge = adm.Purge
	}
	res, err := purge(ctx, c.queue, filter)
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox purge: %v\n", err)
		if errors.Is(err, outbox.ErrQueueNotRegistered) {
			fmt.Fprintln(s.stderr, "nothing was changed; see the queues with seqbox status")
		}
		// What was removed before the failure is still reported.
		if res.Incoming+res.Outgoing == 0 {
			return ExitFailure
		}
		code = ExitFailure
	} else {
		code = ExitOK
	}
	if perr := printPurge(s.stdout, c.asJSON, !c.yes, res); perr != nil {
		fmt.Fprintf(s.stderr, "seqbox purge: %v\n", perr)
		return ExitFailure
	}
	return code
}

func printPurge(w io.Writer, asJSON, dryRun bool, r outbox.PurgeResult) error {
	if asJSON {
		out := PurgeJSON{Queue: r.Queue, DryRun: dryRun, Incoming: r.Incoming, Outgoing: r.Outgoing, InDelivery: r.InFlight,
			Partitions: make([]PurgePartitionJSON, len(r.Partitions))}
		for i, p := range r.Partitions {
			out.Partitions[i] = PurgePartitionJSON{Partition: p.Partition, Incoming: p.Incoming, Outgoing: p.Outgoing, InDelivery: p.InFlight}
		}
		return writeJSON(w, out)
	}
	if len(r.Partitions) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tNOT SEQUENCED\tSEQUENCED\tIN DELIVERY")
		for _, p := range r.Partitions {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", p.Partition, p.Incoming, p.Outgoing, p.InFlight)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var err error
	if dryRun {
		_, err = fmt.Fprintf(w, "would purge %d message(s) of %s: %d not sequenced (deleted), %d sequenced (tombstones); "+
			"%d more are being delivered now and would be left to that delivery\nnothing changed: add --yes to do it\n",
			r.Incoming+r.Outgoing, r.Queue, r.Incoming, r.Outgoing, r.InFlight)
	} else {
		_, err = fmt.Fprintf(w, "purged %d message(s) of %s: %d not sequenced (deleted), %d sequenced (tombstones, passed over by the processors)\n",
			r.Incoming+r.Outgoing, r.Queue, r.Incoming, r.Outgoing)
	}
	return err
}
