// Package seqboxcli is the seqbox command-line tool. It lives in an
// importable package, not in package main, so that every subcommand can be
// run and tested in-process: Main takes the arguments and the output
// streams and returns the exit code.
package seqboxcli

import (
	"context"
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
	ExitOK      = 0 // success
	ExitFailure = 1 // the command ran and failed (verification, database error)
	ExitUsage   = 2 // bad command line
)

// streams are a command's outputs.
type streams struct {
	stdout, stderr io.Writer
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
		{name: "demo", summary: "a first look: messages in order, a retry, a dead letter, what to try next (--stress: a stress test)", run: runDemo, usage: demoUsage},
		{name: "bench", summary: "measure seqbox against a plain INSERT baseline on the same database", run: runBench, usage: benchUsage},
		{name: "migrate", summary: "create or upgrade seqbox's tables (--status: only report the version)", run: runMigrate, usage: migrateUsage},
		{name: "status", summary: "backlog, oldest waiting message, retrying partitions and dead letters per queue", run: runStatus, usage: statusUsage},
		{name: "dlq", summary: "list dead letters and replay, resolve, discard or purge them", run: runDLQ, usage: dlqUsage},
		{name: "partitions", summary: "list parked partitions and resume or skip them", run: runPartitions, usage: partitionsUsage},
		{name: "purge", summary: "remove a queue's undelivered messages by header, e.g. a deleted tenant's (--yes)", run: runPurge, usage: purgeUsage},
	}
}

// pickAction finds args[0] among the actions of a command group (dlq,
// partitions). When it returns ok false the caller returns code: the
// group's usage was printed (no action, or -h) or the action is unknown.
func pickAction[A any](s streams, group string, actions []A, name func(A) string, usage func(io.Writer), args []string) (a A, code int, ok bool) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage(s.stderr)
		if len(args) == 0 {
			return a, ExitUsage, false
		}
		return a, ExitOK, false
	}
	i := slices.IndexFunc(actions, func(a A) bool { return name(a) == args[0] })
	if i < 0 {
		fmt.Fprintf(s.stderr, "seqbox %s: unknown action %q (see seqbox help %s)\n", group, args[0], group)
		return a, ExitUsage, false
	}
	return actions[i], ExitOK, true
}

// parsePartitions reads a comma-separated list of partition numbers.
func parsePartitions(list string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--partition: want partition numbers, got %q", list)
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
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := streams{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			c, ok := lookup(args[1])
			if !ok {
				fmt.Fprintf(stderr, "seqbox: unknown command %q\n\n", args[1])
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
		fmt.Fprintf(stderr, "seqbox: unknown command %q\n\n", args[0])
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
