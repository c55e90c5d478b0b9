package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
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
	// fs is the flag set they were registered on (which flags were given).
	fs *flag.FlagSet
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	f.registerDB(fs)
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (one document; docs/CLI.md has the schema)")
}

// registerDB registers --dsn and --prefix only, for a command that prints
// no JSON (ui).
func (f *dbFlags) registerDB(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.dsn, "dsn", "", "database (required; default $"+EnvDSN+")")
	fs.StringVar(&f.prefix, "prefix", dialect.DefaultPrefix, "table prefix ($"+EnvPrefix+" when set)")
}

// resolve takes from the environment what the flags did not give and
// checks it: an error is a usage error.
func (f *dbFlags) resolve(s streams) error {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if !given["dsn"] && s.getenv != nil {
		f.dsn = s.getenv(EnvDSN)
	}
	source := "--prefix"
	if !given["prefix"] && s.getenv != nil {
		if p := s.getenv(EnvPrefix); p != "" {
			f.prefix, source = p, EnvPrefix
		}
	}
	if f.dsn == "" {
		return fmt.Errorf("--dsn is required (or set %s)", EnvDSN)
	}
	if err := dialect.ValidatePrefix(f.prefix); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if _, _, err := ParseDSN(f.dsn); err != nil {
		return err
	}
	return nil
}

// session is an open database of a command.
type session struct {
	db     *bun.DB
	d      dialect.Dialect
	prefix string
}

func (ss *session) close() { _ = ss.db.Close() }

// open resolves the flags and opens the database for acc; when ss is nil
// the caller returns code (the error was printed).
func (f *dbFlags) open(ctx context.Context, s streams, name string, acc access) (ss *session, code int) {
	if err := f.resolve(s); err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		return nil, ExitUsage
	}
	db, err := openDB(ctx, f.dsn, acc)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		if errors.Is(err, ErrDSN) {
			return nil, ExitUsage
		}
		return nil, ExitFailure
	}
	d, err := dialects.Open(ctx, db, f.prefix)
	if err != nil {
		_ = db.Close()
		fmt.Fprintf(s.stderr, "%s: %v\n", name, err)
		return nil, ExitFailure
	}
	return &session{db: db, d: d, prefix: f.prefix}, ExitOK
}

// schemaHint is what to check when a read of seqbox's tables fails.
const schemaHint = "(is the schema there? seqbox migrate --status --dsn …)\n"

// errUnknownQueue: --queue names a queue the database does not have.
var errUnknownQueue = errors.New("unknown queue")

// checkQueue returns nil when queue is "" or registered, otherwise an
// error (errUnknownQueue) naming the queues there are and the nearest.
func (ss *session) checkQueue(ctx context.Context, queue string) error {
	if queue == "" {
		return nil
	}
	parts, err := ss.d.PartitionList(ctx, &dialect.PartitionListParams{})
	if err != nil {
		return fmt.Errorf("list queues: %w\n%s", err, strings.TrimSuffix(schemaHint, "\n"))
	}
	var queues []string
	for _, p := range parts {
		if !slices.Contains(queues, p.Queue) {
			queues = append(queues, p.Queue)
		}
	}
	if slices.Contains(queues, queue) {
		return nil
	}
	if len(queues) == 0 {
		return fmt.Errorf("%w %q: no queue is registered under table prefix %q", errUnknownQueue, queue, ss.prefix)
	}
	return fmt.Errorf("%w %q: not registered%s; the queues are: %s", errUnknownQueue, queue,
		didYouMean(queue, queues, ""), strings.Join(queues, ", "))
}

// positiveDuration checks a duration flag: a negative one is a usage error.
func positiveDuration(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--%s: %v is negative; give how long, e.g. %v", name, d, -d)
	}
	return nil
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
	fmt.Fprintln(w, "processes at once); a SQLite file that does not exist is created. With --status it only")
	fmt.Fprintln(w, "reports the version, reading the database and creating nothing.")
	fs := migrateFlags(&migrateCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runMigrate(ctx context.Context, s streams, args []string) int {
	var c migrateCLI
	fs := migrateFlags(&c)
	if code, ok := noArgs(s, fs, "migrate", migrateUsage, args); !ok {
		return code
	}
	acc := accessCreate
	if c.status {
		acc = accessRead
	}
	ss, code := c.open(ctx, s, fs.Name(), acc)
	if ss == nil {
		return code
	}
	defer ss.close()
	fail := func(err error) int {
		fmt.Fprintf(s.stderr, "seqbox migrate: %v\n", err)
		return ExitFailure
	}
	before, err := ss.d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	if err != nil {
		return fail(err)
	}
	after := before
	if !c.status {
		if err := ss.d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}); err != nil {
			return fail(err)
		}
		if after, err = ss.d.SchemaStatus(ctx, &dialect.SchemaStatusParams{}); err != nil {
			return fail(err)
		}
	}
	if c.asJSON {
		if err := writeJSON(s.stdout, MigrateJSON{Prefix: ss.prefix, Version: after.Current, Latest: after.Latest,
			Pending: after.Latest - after.Current, Applied: after.Current - before.Current, DryRun: c.status}); err != nil {
			return fail(err)
		}
		return ExitOK
	}
	switch {
	case c.status && before.Current < before.Latest:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: %d migration(s) to apply (seqbox migrate --dsn …)\n",
			ss.prefix, before.Current, before.Latest, before.Latest-before.Current)
	case c.status:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: up to date\n", ss.prefix, before.Current, before.Latest)
	default:
		fmt.Fprintf(s.stdout, "schema %q at version %d of %d: applied %d migration(s)\n", ss.prefix, after.Current, after.Latest,
			after.Current-before.Current)
	}
	return ExitOK
}

// noArgs parses args into fs for a command that takes no positional
// argument; when ok is false the caller returns code.
func noArgs(s streams, fs *flag.FlagSet, name string, usage func(io.Writer), args []string) (code int, ok bool) {
	positional, code, ok := parseFlags(s, fs, name, usage, args)
	if !ok {
		return code, false
	}
	if len(positional) > 0 {
		fmt.Fprintf(s.stderr, "%s: unexpected argument %q (see seqbox help %s)\n", fs.Name(), positional[0], strings.Fields(name)[0])
		return ExitUsage, false
	}
	return ExitOK, true
}

// ---------------------------------------------------------------- status

type statusCLI struct {
	dbFlags
	queue      string
	partitions bool
	watch      time.Duration
}

func statusFlags(c *statusCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox status", flag.ContinueOnError)
	c.register(fs)
	fs.StringVar(&c.queue, "queue", "", "only this queue")
	fs.BoolVar(&c.partitions, "partitions", false, "one line per partition instead of per queue")
	fs.DurationVar(&c.watch, "watch", 0, "print again at this interval until interrupted (0: once; with --json one line per refresh)")
	return fs
}

func statusUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seqbox status --dsn DSN [--prefix P] [--queue Q] [--partitions] [--watch 2s] [--json]")
	fmt.Fprintln(w, "\nPer queue (or partition): messages waiting to be sequenced and to be acked, the age of the")
	fmt.Fprintln(w, "oldest message not yet acked, partitions retrying a failing head, partitions parked at one")
	fmt.Fprintln(w, "(see seqbox partitions), and dead letters by status. Read-only.")
	fs := statusFlags(&statusCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runStatus(ctx context.Context, s streams, args []string) int {
	var c statusCLI
	fs := statusFlags(&c)
	if code, ok := noArgs(s, fs, "status", statusUsage, args); !ok {
		return code
	}
	if err := positiveDuration("watch", c.watch); err != nil {
		fmt.Fprintf(s.stderr, "seqbox status: %v\n", err)
		return ExitUsage
	}
	ss, code := c.open(ctx, s, fs.Name(), accessRead)
	if ss == nil {
		return code
	}
	defer ss.close()
	if err := ss.checkQueue(ctx, c.queue); err != nil {
		fmt.Fprintf(s.stderr, "seqbox status: %v\n", err)
		return ExitFailure
	}
	for {
		ps, err := stats(ctx, ss.db, ss.prefix)
		if err != nil {
			if c.watch > 0 && ended(ctx) {
				return ExitOK // interrupted while watching
			}
			fmt.Fprintf(s.stderr, "seqbox status: %v\n%s", err, schemaHint)
			return ExitFailure
		}
		if c.queue != "" {
			ps = slices.DeleteFunc(ps, func(p outbox.PartitionStats) bool { return p.Queue != c.queue })
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
			if !c.asJSON {
				fmt.Fprintln(s.stdout)
			}
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
	write := writeJSON
	if c.watch > 0 {
		write = writeJSONLine
	}
	if c.partitions {
		if c.asJSON {
			out := StatusPartitionsJSON{At: now.UTC(), Partitions: make([]PartitionStatusJSON, len(ps))}
			for i, p := range ps {
				out.Partitions[i] = PartitionStatusJSON{Queue: p.Queue, Partition: p.Partition, State: partitionState(p),
					Incoming: p.Incoming, Unprocessed: p.Unprocessed, Sequence: p.Sequence, ProcessedSeq: p.ProcessedSeq,
					OldestAgeMs: age(p.OldestUnprocessed).Milliseconds(), Attempts: p.Attempts, LastError: p.LastError,
					NextAttemptAt: utc(p.NextAttemptAt), LeaseUntil: utc(p.LockedUntil), ParkedAt: utc(p.ParkedAt),
					DeadLetters: deadLetterCounts(p.DeadLetters)}
			}
			return write(w, out)
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
		out := StatusJSON{At: now.UTC(), Queues: make([]QueueStatusJSON, len(totals))}
		for i, q := range totals {
			out.Queues[i] = QueueStatusJSON{Queue: q.Queue, Partitions: q.Partitions, Incoming: q.Incoming, Unprocessed: q.Unprocessed,
				OldestAgeMs: age(q.OldestUnprocessed).Milliseconds(), Retrying: q.Retrying, Parked: q.Parked,
				DeadLetters: deadLetterCounts(q.DeadLetters)}
		}
		return write(w, out)
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

// utc is t in UTC; the zero time stays zero (and is left out of JSON).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
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

// admin is the seqbox Admin of a database and table prefix.
func admin(ctx context.Context, db *bun.DB, prefix string) (*seqbox.Admin, error) {
	return seqbox.NewAdmin(ctx, db, prefix)
}

// stats reads every partition's state without a running outbox.
func stats(ctx context.Context, db *bun.DB, prefix string) ([]outbox.PartitionStats, error) {
	a, err := admin(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	st, err := a.Stats(ctx)
	return st.Partitions, err
}

// deadLetters is the dead-letter actions of a database and table prefix.
func deadLetters(ctx context.Context, db *bun.DB, prefix string) (*seqbox.DeadLetters, error) {
	a, err := admin(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return a.DeadLetters(), nil
}

// partitionsAdmin is the partition actions of a database and table prefix.
func partitionsAdmin(ctx context.Context, db *bun.DB, prefix string) (*seqbox.Partitions, error) {
	a, err := admin(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return a.Partitions(), nil
}

// ended reports a context that is done or whose deadline has passed: a
// driver that maps the deadline onto its connection (pgdriver) reports an
// i/o timeout a moment before the context itself says so.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
