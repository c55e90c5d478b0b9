// Package seqboxcli is the seqbox command-line tool. It lives in an
// importable package, not in package main, so that every subcommand can be
// run and tested in-process: Main takes the arguments and the output
// streams and returns the exit code.
package seqboxcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Exit codes.
const (
	ExitOK      = 0 // success, "nothing to do" included
	ExitFailure = 1 // the command ran and failed (verification, database error, a refused action)
	ExitUsage   = 2 // bad command line: unknown command or flag, bad flag value
)

// The environment variables the database commands read when the flag is
// not given (the flag wins).
const (
	EnvDSN    = "SEQBOX_DSN"
	EnvPrefix = "SEQBOX_PREFIX"
)

const exitHelp = `Exit codes:
  0  success, including "nothing to do"
  1  the command ran and failed: a database error, an unknown --queue, an action
     refused (a preview exits 1 exactly when its --yes would)
  2  bad command line: unknown command or flag, bad flag value
`

const envHelp = `Environment (migrate, status, dlq, partitions, purge, ui; a flag wins over it):
  ` + EnvDSN + `            the database when --dsn is not given
  ` + EnvPrefix + `         the table prefix when --prefix is not given
  ` + EnvUIToken + `       ui's --token (ps does not show the environment)
  ` + EnvUIBasicAuth + `  ui's --basic-auth, USER:PASS
`

// streams are a command's outputs and environment.
type streams struct {
	stdout, stderr io.Writer
	// getenv reads the environment (os.Getenv, or a test's).
	getenv func(string) string
}

// command is one subcommand. run parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, s streams, args []string) int
	// usage prints the command's flags to w; nil if it has none.
	usage func(w io.Writer)
}

// commands is the dispatch table, built per call so that the package holds
// no mutable state.
func commands() []command {
	return []command{
		{name: "demo", summary: "run producers and consumers against a database and verify every guarantee", run: runDemoChecked, usage: demoUsage},
		{name: "bench", summary: "measure seqbox against a plain INSERT baseline on the same database", run: runBench, usage: benchUsage},
		{name: "migrate", summary: "create or upgrade seqbox's tables (--status: only report the version)", run: runMigrate, usage: migrateUsage},
		{name: "status", summary: "backlog, oldest waiting message, retrying partitions and dead letters per queue", run: runStatus, usage: statusUsage},
		{name: "dlq", summary: "list dead letters and replay, resolve, discard or purge them", run: runDLQ, usage: dlqUsage},
		{name: "partitions", summary: "list retrying and parked partitions; resume, retry or skip their heads", run: runPartitions, usage: partitionsUsage},
		{name: "purge", summary: "remove a queue's undelivered messages by header, e.g. a deleted tenant's (--yes)", run: runPurge, usage: purgeUsage},
		{name: "ui", summary: "serve the operator web UI (loopback by default; --read-only; --token or --basic-auth)", run: runUI, usage: uiUsage},
		{name: "version", summary: "print seqbox's version and the Go version it was built with", run: runVersion, usage: versionUsage},
	}
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return append(names, "help")
}

// runDemoChecked runs demo after suggesting the nearest flag for one it
// does not know (demo parses its own flags, in demo.go).
func runDemoChecked(ctx context.Context, s streams, args []string) int {
	fs := demoFlags(io.Discard, &demoConfig{})
	if err := fs.Parse(args); err != nil && unknownFlag(err) != "" {
		return flagError(s, fs, "demo", err)
	}
	return runDemo(ctx, s, args)
}

// pickAction finds args[0] among the actions of a command group (dlq,
// partitions). When it returns ok false the caller returns code: the
// group's usage was printed (no action, or -h) or the action is unknown.
func pickAction[A any](s streams, group string, actions []A, name func(A) string, usage func(io.Writer), args []string) (a A, code int, ok bool) {
	if len(args) == 0 {
		usage(s.stderr)
		return a, ExitUsage, false
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		usage(s.stdout)
		return a, ExitOK, false
	}
	i := slices.IndexFunc(actions, func(a A) bool { return name(a) == args[0] })
	if i < 0 {
		var names []string
		for _, a := range actions {
			names = append(names, name(a))
		}
		fmt.Fprintf(s.stderr, "seqbox %s: unknown action %q%s (see seqbox help %s)\n", group, args[0], didYouMean(args[0], names, ""), group)
		return a, ExitUsage, false
	}
	return actions[i], ExitOK, true
}

// parseFlags parses args into fs, flags and arguments interleaved
// (seqbox dlq show <id> --dsn …, which flag.Parse alone stops at), and
// returns the positional arguments. When ok is false the caller returns
// code: help was asked for (printed to stdout, ExitOK) or the command line
// is bad (reported with the nearest flag suggested, ExitUsage).
func parseFlags(s streams, fs *flag.FlagSet, helpName string, usage func(io.Writer), args []string) (positional []string, code int, ok bool) {
	fs.SetOutput(io.Discard) // errors are reported below, once, with a suggestion
	fs.Usage = func() {}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(s.stdout)
				return nil, ExitOK, false
			}
			return nil, flagError(s, fs, helpName, err), false
		}
		if fs.NArg() == 0 {
			return positional, ExitOK, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// unknownFlag is the name in flag's "not defined" error, or "".
func unknownFlag(err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	return strings.TrimLeft(name, "-")
}

// flagError reports a flag parse error, suggesting the nearest flag for
// an unknown one, and returns ExitUsage.
func flagError(s streams, fs *flag.FlagSet, helpName string, err error) int {
	if name := unknownFlag(err); name != "" {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		fmt.Fprintf(s.stderr, "seqbox %s: unknown flag --%s%s (see seqbox help %s)\n", helpName, name,
			didYouMean(name, names, "--"), strings.Fields(helpName)[0])
		return ExitUsage
	}
	fmt.Fprintf(s.stderr, "seqbox %s: %s (see seqbox help %s)\n", helpName, strings.ReplaceAll(err.Error(), " -", " --"),
		strings.Fields(helpName)[0])
	return ExitUsage
}

// didYouMean is ` (did you mean "name"?)` for the candidate nearest to
// word, or "" when none is near; with a prefix (a flag's "--") the name is
// not quoted: (did you mean --name?).
func didYouMean(word string, candidates []string, prefix string) string {
	best := nearest(word, candidates)
	switch {
	case best == "":
		return ""
	case prefix == "":
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// nearest is the candidate closest to word by edit distance (a
// transposition counts one), or one that word begins, when it is close
// enough to be a typo: "" otherwise.
func nearest(word string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			d = min(d, 1)
		}
		n := len([]rune(word))
		if d < n && d <= max(1, n/3) && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance of a and b:
// insertions, deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// parsePartitions reads a comma-separated list of partition numbers.
func parsePartitions(list string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--partition: want partition numbers, got %q", list)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("--partition: %d given twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// Main runs the seqbox command line with args (without the program name)
// and returns the process exit code: ExitOK, ExitFailure or ExitUsage.
// It reads SEQBOX_DSN and SEQBOX_PREFIX from the process environment.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return MainEnv(ctx, args, os.Getenv, stdout, stderr)
}

// MainEnv is Main with the environment read through getenv, so that a
// caller (a test) decides what SEQBOX_DSN and SEQBOX_PREFIX hold.
func MainEnv(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	s := streams{stdout: stdout, stderr: stderr, getenv: getenv}
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			c, ok := lookup(args[1])
			if !ok {
				fmt.Fprintf(stderr, "seqbox: unknown command %q%s\n\n", args[1], didYouMean(args[1], commandNames(), ""))
				usage(stderr)
				return ExitUsage
			}
			if c.usage != nil {
				c.usage(stdout)
			}
			return ExitOK
		}
		usage(stdout)
		return ExitOK
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "seqbox: unknown command %q%s\n\n", args[0], didYouMean(args[0], commandNames(), ""))
		usage(stderr)
		return ExitUsage
	}
	return c.run(ctx, s, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprint(w, "seqbox is the command-line tool of the seqbox transactional outbox.\n\n")
	fmt.Fprint(w, "Usage:\n  seqbox <command> [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help [command]\tshow this help or a command's flags\n")
	_ = tw.Flush()
	fmt.Fprint(w, "\nDatabases (--dsn):\n"+dsnHelp)
	fmt.Fprint(w, "\n"+envHelp)
	fmt.Fprint(w, "\n"+exitHelp)
	fmt.Fprint(w, "\nWith --json every command prints one JSON document on stdout (docs/CLI.md has the schemas).\n")
}

// isTerminal reports whether w is a terminal, so progress can redraw one
// line with \r instead of printing a line per update.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
