package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
)

type benchCLI struct {
	scenarios  string
	asJSON     bool
	cpuProfile string
}

func benchFlags(o *bench.Options, c *benchCLI) *flag.FlagSet {
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
	fs.IntVar(&o.SequencerWorkers, "sequencer-workers", 0, "override the sequencer's worker count (0: library default)")
	fs.IntVar(&o.SequencerBatch, "sequencer-batch", 0, "override the sequencer's rows per move (0: library default)")
	fs.IntVar(&o.ProcessorConcurrency, "processor-concurrency", 0, "override the processors' concurrency (0: library default)")
	fs.IntVar(&o.ProcessorBatch, "processor-batch", 0, "override the queue's messages per handler call (0: library default)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.StringVar(&c.scenarios, "scenarios", "", "comma-separated subset of: "+strings.Join(bench.AllScenarios(), ", ")+" (default: all)")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON")
	return fs
}

func benchUsage(w io.Writer) {
	var o bench.Options
	var c benchCLI
	fs := benchFlags(&o, &c)
	fs.SetOutput(w)
	fmt.Fprintln(w, "usage: seqbox bench [flags]")
	fmt.Fprintln(w, "\nMeasures seqbox against a plain multi-row INSERT baseline on the same database, in the same run.")
	fs.PrintDefaults()
}

func runBench(ctx context.Context, s streams, args []string) int {
	var o bench.Options
	var c benchCLI
	fs := benchFlags(&o, &c)
	fs.SetOutput(s.stderr)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.stderr, "seqbox bench: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	if c.scenarios != "" {
		o.Scenarios = strings.Split(c.scenarios, ",")
	}
	if c.cpuProfile != "" {
		stop, err := startCPUProfile(c.cpuProfile)
		if err != nil {
			fmt.Fprintf(s.stderr, "seqbox bench: %v\n", err)
			return ExitFailure
		}
		defer stop()
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
	if c.asJSON {
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

// startCPUProfile profiles the process until the returned stop runs.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
