package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// poolFake answers the buffer pool check's two reads.
type poolFake struct {
	size       int64
	partitions int
	sizeErr    error
	listErr    error
}

func (f poolFake) BufferPoolBytes(context.Context) (int64, error) { return f.size, f.sizeErr }
func (f poolFake) PartitionList(context.Context, *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	return make([]dialect.PartitionInfo, f.partitions), f.listErr
}

// TestBufferPoolCheck: Start warns when the pool is below 32 MiB + 64 KiB
// per partition of the database, at the edge not, and a failed read is no
// warning (the check is advice, and Start goes on).
func TestBufferPoolCheck(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		f    poolFake
		warn bool
	}{
		{"default pool, 1,024 partitions", poolFake{size: 128 * mib, partitions: 1024}, false},
		{"default pool, 1,536 partitions: at the edge", poolFake{size: 128 * mib, partitions: 1536}, false},
		{"default pool, 1,537 partitions", poolFake{size: 128 * mib, partitions: 1537}, true},
		{"default pool, 4,096 partitions", poolFake{size: 128 * mib, partitions: 4096}, true},
		{"1 GiB pool, 4,096 partitions", poolFake{size: 1024 * mib, partitions: 4096}, false},
		{"size unread", poolFake{sizeErr: errors.New("denied"), partitions: 4096}, false},
		{"partitions unread", poolFake{size: 128 * mib, partitions: 4096, listErr: errors.New("gone")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			warned := checkBufferPool(context.Background(), c.f, slog.New(slog.NewTextHandler(&logs, nil)))
			require.Equal(t, c.warn, warned)
			if !c.warn {
				require.Empty(t, logs.String())
				return
			}
			require.Contains(t, logs.String(), "innodb_buffer_pool_size")
			require.Contains(t, logs.String(), "innodb_buffer_pool_size_mib=128")
		})
	}
	require.Equal(t, int64(288*mib), bufferPoolNeed(4096))
}
