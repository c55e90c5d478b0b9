package engine

import (
	"context"
	"log/slog"

	"github.com/seqbox/seqbox/dialect"
)

// BufferPoolReader is an optional part of a dialect, found by type
// assertion: the size of a server cache that holds every page a query
// reads and that does not grow with the machine's memory (InnoDB's buffer
// pool on MySQL/MariaDB; PostgreSQL reads through the system's page
// cache, and SQLite through the file).
type BufferPoolReader interface {
	BufferPoolBytes(ctx context.Context) (int64, error)
}

// bufferPoolDialect is what the check reads.
type bufferPoolDialect interface {
	BufferPoolReader
	PartitionList(ctx context.Context, params *dialect.PartitionListParams) ([]dialect.PartitionInfo, error)
}

// A backlog keeps a few pages of every partition in use at once: the
// leaves where moves insert into incoming and outgoing, the head the
// processors read, the partition's bookkeeping rows, 16 KiB each on
// InnoDB. When the pool cannot hold them, every visit of a partition
// reads them from disk again, the backlog grows, and the pipeline falls
// off a cliff rather than slowing down: on MariaDB 10.11 with a 128 MiB
// pool (the server's default), 4,096 partitions delivered 6.9k msgs/s
// and read 647k pages from disk in 30 s; with 256 MiB, 16.8k and 427
// pages; 2,048 partitions with 128 MiB 11.7k (380k pages), 1,024 21.4k
// (410 pages). docs/ARCHITECTURE.md, "Cost that stays flat" ("Many
// partitions in a fixed page cache").
const (
	bufferPoolPerPartition = 64 << 10
	bufferPoolBase         = 32 << 20
)

// bufferPoolNeed is the buffer pool a database of n partitions (every
// queue's, whichever process registered them) needs under a backlog.
func bufferPoolNeed(n int) int64 {
	return bufferPoolBase + int64(n)*bufferPoolPerPartition
}

// checkBufferPool warns when the server's buffer pool is smaller than the
// database's partitions need, and reports whether it did. It is advice:
// a failed read is logged at debug level and Start goes on.
func checkBufferPool(ctx context.Context, d bufferPoolDialect, log *slog.Logger) bool {
	size, err := d.BufferPoolBytes(ctx)
	if err != nil {
		log.Debug("reading the buffer pool's size failed", slog.Any("error", err))
		return false
	}
	parts, err := d.PartitionList(ctx, &dialect.PartitionListParams{})
	if err != nil {
		log.Debug("listing partitions for the buffer pool check failed", slog.Any("error", err))
		return false
	}
	need := bufferPoolNeed(len(parts))
	if size >= need {
		return false
	}
	log.Warn("the InnoDB buffer pool is too small for this many partitions: under a backlog their pages are read from disk "+
		"on every visit and delivery slows several-fold; raise innodb_buffer_pool_size (README, \"Databases\")",
		slog.Int("partitions", len(parts)), slog.Int64("innodb_buffer_pool_size_mib", size>>20),
		slog.Int64("needed_mib", (need+(1<<20)-1)>>20))
	return true
}
