package conformance

import (
	"os"
	"testing"
)

// TestCrashWorkerProcess is the body of the worker processes that the
// CrashRestartNothingLost case starts by re-running this test binary, and
// SIGKILLs; run any other way it returns at once.
func TestCrashWorkerProcess(t *testing.T) {
	if os.Getenv(crashWorkerEnv) != "1" {
		return
	}
	runCrashWorker(t)
}
