package seqboxcli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = seqboxcli.Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoDefaultSQLite(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "demo", "--messages", "2000", "--quiet")
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
		{name: "demo bad flag", args: []string{"demo", "--nope"}, code: seqboxcli.ExitUsage, stderr: "flag provided but not defined", noStdout: true},
		{name: "demo bad value", args: []string{"demo", "--messages", "0"}, code: seqboxcli.ExitUsage, stderr: "--messages", noStdout: true},
		{name: "demo bad pct", args: []string{"demo", "--rollback-pct", "101"}, code: seqboxcli.ExitUsage, stderr: "--rollback-pct", noStdout: true},
		{name: "demo stray argument", args: []string{"demo", "extra"}, code: seqboxcli.ExitUsage, stderr: `unexpected argument "extra"`, noStdout: true},
		{name: "demo bad dsn", args: []string{"demo", "--dsn", "redis://localhost"}, code: seqboxcli.ExitUsage, stderr: "invalid DSN", noStdout: true},
		{name: "help bench", args: []string{"help", "bench"}, code: seqboxcli.ExitOK, stdout: "-sequencer-workers"},
		{name: "bench bad knob", args: []string{"bench", "--processor-batch", "-1"}, code: seqboxcli.ExitUsage, stderr: "knob overrides", noStdout: true},
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
