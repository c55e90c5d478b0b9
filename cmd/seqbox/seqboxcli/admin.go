package seqboxcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/outbox"
)

// dbFlags are the flags every database command shares.
type dbFlags struct {
	dsn, prefix string
	asJSON      bool
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dsn, "dsn", "", "database (required)")
	fs.StringVar(&f.prefix, "prefix", dialect.DefaultPrefix, "table prefix")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
}

// open parses args and opens the database; code is the exit code to return
// when db is nil.
func (f *dbFlags) open(ctx context.Context, s streams, fs *flag.FlagSet, args []string) (db *bun.DB, code int) {
	fs.SetOutput(s.stderr)
	if err := fs.Parse(args); err != nil {
		return nil, ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return nil, ExitUsage
	}
	return f.connect(ctx, s, fs.Name())
}

// connect opens the database of parsed flags; code is the exit code to
// return when db is nil.
func (f *dbFlags) connect(ctx context.Context, s streams, name string) (db *bun.DB, code int) {
	if f.dsn == "" {
		fmt.Fprintf(s.stderr, "%s: --dsn is required\n", name)
		return nil, ExitUsage
	}
	db, err := OpenDB(ctx, f.dsn)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		if errors.Is(err, ErrDSN) {
			return nil, ExitUsage
		}
		return nil, ExitFailure
	}
	return db, ExitOK
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---------------------------------------------------------------- migrate

type migrateCLI struct {
	dbFlags
	status bool
}

func migrateFlags(c *migrateCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox migrate", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.status, "status", false, "show the schema version and what would be applied; change nothing")
	return fs
}

func migrateUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seqbox migrate --dsn DSN [--prefix P] [--status] [--json]")
	fmt.Fprintln(w, "\nCreates or upgrades seqbox's tables (under a database lock; safe to run from several")
	fmt.Fprintln(w, "processes at once). With --status it only reports the version.")
	fs := migrateFlags(&migrateCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runMigrate(ctx context.Context, s streams, args []string) int {
	var c migrateCLI
	db, code := c.open(ctx, s, migrateFlags(&c), args)
	if db == nil {
		return code
	}
	defer func() { _ = db.Close() }()
	fail := func(err error) int {
		fmt.Fprintf(s.stderr, "seqbox migrate: %v\n", err)
		return ExitFailure
	}
	d, err := dialects.Open(ctx, db, c.prefix)
	if err != nil {
		return fail(err)
	}
	before, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	if err != nil {
		return fail(err)
	}
	after := before
	if !c.status {
		if err := d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}); err != nil {
			return fail(err)
		}
		if after, err = d.SchemaStatus(ctx, &dialect.SchemaStatusParams{}); err != nil {
			return fail(err)
		}
	}
	if c.asJSON {
		if err := writeJSON(s.stdout, map[string]any{"prefix": c.prefix, "version": after.Current, "latest": after.Latest,
			"applied": after.Current - before.Current, "dry_run": c.status}); err != nil {
			return fail(err)
		}
		return ExitOK
	}
	switch {
	case c.status && before.Current < before.Latest:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: %d migration(s) to apply (seqbox migrate --dsn …)\n",
			c.prefix, before.Current, before.Latest, before.Latest-before.Current)
	case c.status:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: up to date\n", c.prefix, before.Current, before.Latest)
	default:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: applied %d migration(s)\n", c.prefix, after.Current, after.Latest,
			after.Current-before.Current)
	}
	return ExitOK
}

// ---------------------------------------------------------------- status

type statusCLI struct {
	dbFlags
	partitions bool
	watch      time.Duration
}

func statusFlags(c *statusCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox status", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.partitions, "partitions", false, "one line per partition instead of per queue")
	fs.DurationVar(&c.watch, "watch", 0, "print again at this interval until interrupted (0: once)")
	return fs
}

func statusUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seqbox status --dsn DSN [--prefix P] [--partitions] [--watch 2s] [--json]")
	fmt.Fprintln(w, "\nPer queue (or partition): messages waiting to be sequenced and to be acked, the age of the")
	fmt.Fprintln(w, "oldest message not yet acked, partitions retrying a failing head, partitions parked at one")
	fmt.Fprintln(w, "(see seqbox partitions), and dead letters by status.")
	fs := statusFlags(&statusCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// queueStatus is a queue's totals as --json prints them.
type queueStatus struct {
	Queue       string           `json:"queue"`
	Partitions  int              `json:"partitions"`
	Incoming    int64            `json:"incoming"`
	Unprocessed int64            `json:"unprocessed"`
	OldestAgeMs int64            `json:"oldest_unprocessed_age_ms"`
	Retrying    int              `json:"retrying_partitions"`
	Parked      int              `json:"parked_partitions"`
	DeadLetters map[string]int64 `json:"dead_letters"`
}

func runStatus(ctx context.Context, s streams, args []string) int {
	var c statusCLI
	db, code := c.open(ctx, s, statusFlags(&c), args)
	if db == nil {
		return code
	}
	defer func() { _ = db.Close() }()
	for {
		ps, err := stats(ctx, db, c.prefix)
		if err != nil {
			if ctx.Err() != nil && c.watch > 0 {
				return ExitOK // interrupted while watching
			}
			fmt.Fprintf(s.stderr, "seqbox status: %v\n(is the schema there? seqbox migrate --status --dsn …)\n", err)
			return ExitFailure
		}
		if err := printStatus(s.stdout, &c, ps, time.Now()); err != nil {
			fmt.Fprintf(s.stderr, "seqbox status: %v\n", err)
			return ExitFailure
		}
		if c.watch <= 0 {
			return ExitOK
		}
		select {
		case <-ctx.Done():
			return ExitOK
		case <-time.After(c.watch):
			fmt.Fprintln(s.stdout)
		}
	}
}

func printStatus(w io.Writer, c *statusCLI, ps []outbox.PartitionStats, now time.Time) error {
	age := func(t time.Time) time.Duration {
		if t.IsZero() {
			return 0
		}
		return max(now.Sub(t), 0).Round(time.Millisecond)
	}
	if c.partitions {
		if c.asJSON {
			return writeJSON(w, map[string]any{"at": now.UTC(), "partitions": ps})
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tPARTITION\tINCOMING\tUNPROCESSED\tOLDEST\tSTATE\tATTEMPTS\tDEAD (pending)\tLAST ERROR")
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\n", p.Queue, p.Partition, p.Incoming, p.Unprocessed,
				age(p.OldestUnprocessed), partitionState(p), p.Attempts, p.DeadLetters["pending"], oneLine(p.LastError, 50))
		}
		return tw.Flush()
	}
	totals := outbox.QueueTotals(ps)
	if c.asJSON {
		queues := make([]queueStatus, len(totals))
		for i, q := range totals {
			queues[i] = queueStatus{Queue: q.Queue, Partitions: q.Partitions, Incoming: q.Incoming, Unprocessed: q.Unprocessed,
				OldestAgeMs: age(q.OldestUnprocessed).Milliseconds(), Retrying: q.Retrying, Parked: q.Parked, DeadLetters: q.DeadLetters}
		}
		return writeJSON(w, map[string]any{"at": now.UTC(), "queues": queues})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITIONS\tINCOMING\tUNPROCESSED\tOLDEST\tRETRYING\tPARKED\tDEAD (pending)")
	for _, q := range totals {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", q.Queue, q.Partitions, q.Incoming, q.Unprocessed,
			age(q.OldestUnprocessed), q.Retrying, q.Parked, q.DeadLetters["pending"])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, q := range totals {
		if q.Parked > 0 {
			fmt.Fprintf(w, "\n%d partition(s) parked: seqbox partitions list --queue %s, then resume or skip each.\n", q.Parked, q.Queue)
		}
	}
	return nil
}

// partitionState is how status --partitions shows a partition.
func partitionState(p outbox.PartitionStats) string {
	switch {
	case p.Parked:
		return "parked"
	case p.Retrying():
		return "retrying"
	case p.Unprocessed > 0 || p.Incoming > 0:
		return "working"
	}
	return "idle"
}

// stats reads every partition's state without a running outbox.
func stats(ctx context.Context, db *bun.DB, prefix string) ([]outbox.PartitionStats, error) {
	adm, err := seqbox.NewAdmin(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	st, err := adm.Stats(ctx)
	return st.Partitions, err
}
