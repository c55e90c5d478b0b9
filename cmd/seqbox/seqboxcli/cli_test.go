package seqboxcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
)

// run runs the command line with an empty environment, so that a
// SEQBOX_DSN of the shell running the tests changes nothing.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv runs the command line with env as its whole environment.
func runEnv(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = seqboxcli.MainEnv(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoStressDefaultSQLite(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "demo", "--stress", "--messages", "2000", "--quiet")
	require.Equal(t, seqboxcli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "-> OK")
	require.Contains(t, out, "end-to-end:")
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
	}{
		{name: "no command", args: nil, code: seqboxcli.ExitUsage, stderr: "Usage:", noStdout: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: seqboxcli.ExitUsage, stderr: `unknown command "frobnicate"`, noStdout: true},
		{name: "help", args: []string{"help"}, code: seqboxcli.ExitOK, stdout: "demo"},
		{name: "-h", args: []string{"-h"}, code: seqboxcli.ExitOK, stdout: "Commands:"},
		{name: "help demo", args: []string{"help", "demo"}, code: seqboxcli.ExitOK, stdout: "-rollback-pct"},
		{name: "help unknown", args: []string{"help", "nope"}, code: seqboxcli.ExitUsage, stderr: `unknown command "nope"`},
		{name: "demo -h", args: []string{"demo", "-h"}, code: seqboxcli.ExitOK, stderr: "Usage: seqbox demo"},
		{name: "demo bad flag", args: []string{"demo", "--nope"}, code: seqboxcli.ExitUsage, stderr: "unknown flag --nope", noStdout: true},
		{name: "demo bad value", args: []string{"demo", "--stress", "--messages", "0"}, code: seqboxcli.ExitUsage, stderr: "--messages", noStdout: true},
		{name: "demo bad pct", args: []string{"demo", "--stress", "--rollback-pct", "101"}, code: seqboxcli.ExitUsage, stderr: "--rollback-pct", noStdout: true},
		{name: "demo stress flag without --stress", args: []string{"demo", "--messages", "10", "--quiet"}, code: seqboxcli.ExitUsage, stderr: "--messages, --quiet only with --stress", noStdout: true},
		{name: "demo stray argument", args: []string{"demo", "extra"}, code: seqboxcli.ExitUsage, stderr: `unexpected argument "extra"`, noStdout: true},
		{name: "demo bad dsn", args: []string{"demo", "--dsn", "redis://localhost"}, code: seqboxcli.ExitUsage, stderr: "invalid DSN", noStdout: true},
		{name: "help bench", args: []string{"help", "bench"}, code: seqboxcli.ExitOK, stdout: "-sequencer-workers"},
		{name: "bench bad knob", args: []string{"bench", "--processor-batch", "-1"}, code: seqboxcli.ExitUsage, stderr: "knob overrides", noStdout: true},
		{name: "help bench growth", args: []string{"help", "bench"}, code: seqboxcli.ExitOK, stdout: "-soak-duration"},
		{name: "bench bad drain sizes", args: []string{"bench", "--drain-messages", "1000,x"}, code: seqboxcli.ExitUsage, stderr: "-drain-messages", noStdout: true},
		{name: "bench bad sweep", args: []string{"bench", "--partition-sweep", "16,0"}, code: seqboxcli.ExitUsage, stderr: "-partition-sweep", noStdout: true},
		{name: "bench bad sweep count", args: []string{"bench", "--scenarios", "partitions", "--partition-sweep", "16,8192"}, code: seqboxcli.ExitUsage, stderr: "partition sweep", noStdout: true},
		{name: "bench bad autovacuum", args: []string{"bench", "--pg-autovacuum", "auto"}, code: seqboxcli.ExitUsage, stderr: "pg autovacuum", noStdout: true},
		{name: "bench unknown scenario", args: []string{"bench", "--scenarios", "soak,nope"}, code: seqboxcli.ExitUsage, stderr: `unknown scenario "nope"`, noStdout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tt.args...)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Contains(t, out, tt.stdout)
			require.Contains(t, errOut, tt.stderr)
			if tt.noStdout {
				require.Empty(t, out)
			}
		})
	}
}

// TestBenchGrowthFlags: the growth scenarios' flags reach the harness and
// their figures and ratios reach the JSON report.
func TestBenchGrowthFlags(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "bench", "--scenarios", "drain,held-snapshot,soak", "--runs", "1", "--duration", "300ms",
		"--partitions", "2", "--producers", "1", "--batch", "10", "--drain-messages", "200,400", "--held-window", "500ms",
		"--soak-duration", "1s", "--soak-interval", "250ms", "--soak-rate", "200", "--json")
	require.Equal(t, seqboxcli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	var rep struct {
		Options struct {
			DrainMessages []int  `json:"drain_messages"`
			HeldWindow    int64  `json:"held_window_ns"`
			SoakRate      int    `json:"soak_rate"`
			PGAutovacuum  string `json:"pg_autovacuum"`
		} `json:"options"`
		Results []struct {
			Scenario string `json:"scenario"`
			Ratios   []struct {
				Name   string  `json:"name"`
				Median float64 `json:"median"`
			} `json:"ratios"`
			Samples []map[string]any `json:"samples"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, []int{200, 400}, rep.Options.DrainMessages)
	require.Equal(t, int64(500*time.Millisecond), rep.Options.HeldWindow)
	require.Equal(t, 200, rep.Options.SoakRate)
	require.Equal(t, "leave", rep.Options.PGAutovacuum)
	ratios := map[string]bool{}
	scenarios := map[string]int{}
	for _, r := range rep.Results {
		scenarios[r.Scenario]++
		for _, ratio := range r.Ratios {
			ratios[ratio.Name] = true
		}
		if r.Scenario == "soak" {
			require.NotEmpty(t, r.Samples)
			require.Contains(t, r.Samples[0], "rss_bytes")
		}
	}
	require.Equal(t, map[string]int{"drain": 2, "held-snapshot": 2, "soak": 1}, scenarios)
	for _, name := range []string{"msgs/s 400/200 msgs", "delivered msgs/s held/plain", "latency p99 held/plain"} {
		require.True(t, ratios[name], "ratio %q in %v", name, ratios)
	}
}

// TestBenchCPUProfile: --cpuprofile writes a profile of the whole run.
func TestBenchCPUProfile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cpu.prof")
	code, out, errOut := run(t, "bench", "--scenarios", "latency", "--duration", "300ms", "--runs", "1",
		"--latency-rate", "200", "--cpuprofile", path)
	require.Equal(t, seqboxcli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Positive(t, info.Size())
}
