//go:build benchlive

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestLive runs the full benchmark against one database and writes its
// reports to SEQBOX_BENCH_OUT (default the test's temp dir):
//
//	SEQBOX_BENCH_DB=postgres go test -tags benchlive -run TestLive -timeout 30m -v ./internal/bench
//
// SEQBOX_BENCH_DB is postgres, mysql or sqlite; SEQBOX_BENCH_DURATION and
// SEQBOX_BENCH_RUNS (1) override the 5s x 3 used here, and
// SEQBOX_BENCH_SCENARIOS (comma-separated) picks scenarios.
func TestLive(t *testing.T) {
	which := os.Getenv("SEQBOX_BENCH_DB")
	opts := Options{Duration: 5 * time.Second, Runs: 3, Progress: os.Stderr}
	if v := os.Getenv("SEQBOX_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		opts.Duration = d
	}
	if v := os.Getenv("SEQBOX_BENCH_RUNS"); v == "1" {
		opts.Runs = 1
	}
	if v := os.Getenv("SEQBOX_BENCH_SCENARIOS"); v != "" {
		opts.Scenarios = strings.Split(v, ",")
	}
	switch which {
	case "postgres":
		opts.DSN, opts.Open = dbtest.PostgresDSN(), openPostgres
	case "mysql":
		opts.DSN, opts.Open = dbtest.MySQLDSN(), openMySQL
	case "sqlite":
		opts.Open = openSQLite
	default:
		t.Skip("set SEQBOX_BENCH_DB to postgres, mysql or sqlite")
	}
	rep, err := Run(context.Background(), opts)
	if rep != nil {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Log("\n" + b.String())
		out := os.Getenv("SEQBOX_BENCH_OUT")
		if out == "" {
			out = t.TempDir()
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for ext, write := range map[string]func(f *os.File) error{
			"txt":  func(f *os.File) error { return rep.WriteText(f) },
			"json": func(f *os.File) error { return rep.WriteJSON(f) },
		} {
			f, ferr := os.Create(filepath.Join(out, "bench-"+which+"."+ext))
			if ferr != nil {
				t.Fatal(ferr)
			}
			if werr := write(f); werr != nil {
				t.Error(werr)
			}
			_ = f.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
