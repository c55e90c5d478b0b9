package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
)

func benchFlags(o *bench.Options, scenarios *string, asJSON *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox bench", flag.ContinueOnError)
	fs.StringVar(&o.DSN, "dsn", "", "database to measure (default: a fresh SQLite file in a temporary directory)")
	fs.DurationVar(&o.Duration, "duration", bench.DurationDefault, "length of each timed run")
	fs.IntVar(&o.Partitions, "partitions", bench.PartitionsDefault, "partitions of the benchmark queue")
	fs.IntVar(&o.Payload, "payload", bench.PayloadDefault, "payload size in bytes")
	fs.IntVar(&o.Producers, "producers", 0, "producers for every scenario (default: per scenario, see README)")
	fs.IntVar(&o.Batch, "batch", bench.BatchDefault, "messages per transaction in enqueue-batch and sustained")
	fs.IntVar(&o.Runs, "runs", bench.RunsDefault, "runs per figure (the median is reported, with min-max)")
	fs.IntVar(&o.DrainMessages, "drain-messages", bench.DrainMessagesDefault, "backlog preloaded by the drain scenario")
	fs.IntVar(&o.LatencyRate, "latency-rate", bench.LatencyRateDefault, "offered msgs/s of the latency scenario")
	fs.StringVar(scenarios, "scenarios", "", "comma-separated subset of: "+strings.Join(bench.AllScenarios(), ", ")+" (default: all)")
	fs.BoolVar(asJSON, "json", false, "print the report as JSON")
	return fs
}

func benchUsage(w io.Writer) {
	var o bench.Options
	var scenarios string
	var asJSON bool
	fs := benchFlags(&o, &scenarios, &asJSON)
	fs.SetOutput(w)
	fmt.Fprintln(w, "usage: seqbox bench [flags]")
	fmt.Fprintln(w, "\nMeasures seqbox against a plain multi-row INSERT baseline on the same database, in the same run.")
	fs.PrintDefaults()
}

func runBench(ctx context.Context, s streams, args []string) int {
	var o bench.Options
	var scenarios string
	var asJSON bool
	fs := benchFlags(&o, &scenarios, &asJSON)
	fs.SetOutput(s.stderr)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.stderr, "seqbox bench: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	if scenarios != "" {
		o.Scenarios = strings.Split(scenarios, ",")
	}
	o.Open = OpenDB
	o.Logger = slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if isTerminal(s.stderr) {
		o.Progress = s.stderr
	}
	started := time.Now()
	report, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox bench: %v\n", err)
		if errors.Is(err, bench.ErrInvalidOptions) {
			return ExitUsage
		}
		return ExitFailure
	}
	if asJSON {
		err = report.WriteJSON(s.stdout)
	} else {
		err = report.WriteText(s.stdout)
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "seqbox bench: %v\n", err)
		return ExitFailure
	}
	fmt.Fprintf(s.stderr, "seqbox bench: done in %v\n", time.Since(started).Round(time.Second))
	return ExitOK
}
