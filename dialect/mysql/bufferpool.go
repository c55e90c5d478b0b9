package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// settingsSQL reads server settings that may change while the server
// runs, so not among the probes New reads once.
type settingsSQL struct {
	// BufferPool is InnoDB's buffer pool size in bytes (resizable online).
	BufferPool *kit.Stmt
}

var settings = settingsSQL{
	BufferPool: kit.Inline(`SELECT @@innodb_buffer_pool_size`),
}

// BufferPoolBytes is the server's InnoDB buffer pool size: Start warns
// when it is too small for the database's partitions (docs/ARCHITECTURE.md,
// "Cost that stays flat").
func (d *mysqlDialect) BufferPoolBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := d.Query(ctx, d.DB(), settings.BufferPool, nil, &n); err != nil {
		return 0, err
	}
	return n, nil
}
