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
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
)

type benchCLI struct {
	scenarios  string
	asJSON     bool
	cpuProfile string
}

// intList is a comma-separated list of positive integers as a flag value.
type intList struct{ v *[]int }

func (l intList) String() string {
	if l.v == nil {
		return ""
	}
	s := make([]string, len(*l.v))
	for i, n := range *l.v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l intList) Set(value string) error {
	var out []int
	for _, f := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("want positive integers separated by commas, got %q", value)
		}
		out = append(out, n)
	}
	*l.v = out
	return nil
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
	o.DrainMessages = []int{bench.DrainMessagesDefault}
	fs.Var(intList{&o.DrainMessages}, "drain-messages", "backlog preloaded by the drain scenario; several sizes (200000,1000000) are drained\n"+
		"in turn each run and compared (msgs/s of each to the first's)")
	fs.IntVar(&o.LatencyRate, "latency-rate", bench.LatencyRateDefault, "offered msgs/s of the latency scenario")
	fs.IntVar(&o.CapacityStart, "capacity-start", bench.CapacityStartDefault, "offered msgs/s of the capacity scenario's first step (each next step offers 25% more; the last gap is then bisected twice)")
	fs.DurationVar(&o.HeldWindow, "held-window", bench.HeldWindowDefault, "held-snapshot: length of each window (plain, then with a snapshot held)")
	fs.IntVar(&o.HeldRate, "held-rate", 0, "held-snapshot: offered msgs/s in both windows (0: the producers' full rate)")
	o.PartitionSweep = bench.PartitionSweepDefault()
	fs.Var(intList{&o.PartitionSweep}, "partition-sweep", "partitions: partition counts to compare (sustained and latency, --duration each)")
	fs.DurationVar(&o.SoakDuration, "soak-duration", bench.SoakDurationDefault, "soak: length of the run")
	fs.DurationVar(&o.SoakInterval, "soak-interval", bench.SoakIntervalDefault, "soak: time between samples")
	fs.IntVar(&o.SoakRate, "soak-rate", 0, fmt.Sprintf("soak: offered msgs/s (0: %.0f%% of a sustained run of --duration measured first)", 100*bench.SoakRateShareDefault))
	fs.StringVar(&o.PGAutovacuum, "pg-autovacuum", bench.AutovacuumLeave, "PostgreSQL: set autovacuum on or off for the run (ALTER SYSTEM + reload, restored\n"+
		"afterwards; the user must be a superuser), or leave it")
	fs.IntVar(&o.SequencerWorkers, "sequencer-workers", 0, "override the sequencer's worker count (0: library default)")
	fs.IntVar(&o.SequencerBatch, "sequencer-batch", 0, "override the sequencer's rows per move (0: library default)")
	fs.IntVar(&o.ProcessorConcurrency, "processor-concurrency", 0, "override the processors' concurrency (0: library default)")
	fs.IntVar(&o.ProcessorBatch, "processor-batch", 0, "override the queue's messages per handler call (0: library default)")
	fs.DurationVar(&o.RotateInterval, "rotate-interval", 0, "PostgreSQL: override how often the message tables' generation switches (0: library default, negative: never)")
	fs.Int64Var(&o.RotateSize, "rotate-size", 0, "PostgreSQL: override the size in bytes at which the message tables' generation switches (0: library default, negative: never by size)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.StringVar(&c.scenarios, "scenarios", "", "comma-separated subset of: "+strings.Join(bench.AllScenarios(), ", ")+
		"\n(default: "+strings.Join(bench.DefaultScenarios(), ", ")+")")
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
	fmt.Fprintln(w, "capacity raises a paced offered load until the pipeline falls behind (or lowers it, when its first")
	fmt.Fprintln(w, "step already does) and reports the highest delivered rate that kept up, beside the one-table")
	fmt.Fprintln(w, "INSERT ceiling of the same run.")
	fmt.Fprintln(w, "The growth scenarios (held-snapshot, partitions, soak; drain with several sizes) report ratios")
	fmt.Fprintln(w, "of two conditions measured in the same run: whether cost stays flat.")
	fs.PrintDefaults()
}

func runBench(ctx context.Context, s streams, args []string) int {
	var o bench.Options
	var c benchCLI
	fs := benchFlags(&o, &c)
	if code, ok := noArgs(s, fs, "bench", benchUsage, args); !ok {
		return code
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
	if errors.Is(err, bench.ErrInvalidOptions) {
		fmt.Fprintf(s.stderr, "seqbox bench: %v\n", err)
		return ExitUsage
	}
	// A run that failed part way still prints what it measured (a soak's
	// samples up to the failure), then the error.
	if report != nil && (err == nil || len(report.Results) > 0) {
		var werr error
		if c.asJSON {
			werr = report.WriteJSON(s.stdout)
		} else {
			werr = report.WriteText(s.stdout)
		}
		if werr != nil {
			fmt.Fprintf(s.stderr, "seqbox bench: %v\n", werr)
			return ExitFailure
		}
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
