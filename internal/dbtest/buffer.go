package dbtest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that goroutines of the code under test may
// write to (a slog handler's sink, a worker's output) while the test reads
// it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
