// Package relaytest is the kill-and-verify check of the relay modules: a
// relay runs in worker processes (the test binary, run again) that are
// SIGKILLed mid-stream and restarted, and the test then checks what the
// broker holds, as the core suite's CrashRestartNothingLost does for the
// database.
package relaytest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/outbox"
)

// WorkerEnv carries the worker's database file; a test run without it is
// not a worker.
const WorkerEnv = "SEQBOX_RELAY_WORKER_DB"

// KillAndRestart runs the test named worker of this test binary with
// WorkerEnv=dbFile and env, kills times, each SIGKILLed after a random
// 100–350 ms, then once more until it exits by itself (which a worker does
// when its queue is drained). It returns how many kills landed on a
// running worker.
func KillAndRestart(t *testing.T, worker, dbFile string, env []string, kills int) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^"+worker+"$", "-test.timeout=5m")
		cmd.Env = append(append(os.Environ(), WorkerEnv+"="+dbFile), env...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	landed := 0
	for range kills {
		cmd := start()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("worker failed before its kill: %v", err)
			}
			return landed // drained already: nothing left to kill
		case <-time.After(time.Duration(100+rand.IntN(250)) * time.Millisecond):
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		var exit *exec.ExitError
		if err := <-done; errors.As(err, &exit) {
			if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				landed++
			}
		}
	}
	cmd := start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final worker: %v", err)
	}
	return landed
}

// WaitDrained returns when ob's queues have nothing left to deliver, or
// with ctx's error.
func WaitDrained(ctx context.Context, ob *outbox.Outbox) error {
	for {
		st, err := ob.Stats(ctx)
		if err == nil {
			left := int64(0)
			for _, q := range st.Queues {
				left += q.Incoming + q.Unprocessed
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
