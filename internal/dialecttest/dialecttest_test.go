package dialecttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
)

// TestDialects runs the suite on every database, the databases in
// parallel with each other, with wake-ups through pgdriver on PostgreSQL.
func TestDialects(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			db := o.Open(t)
			Run(t, func(t *testing.T, prefix string) dialect.Dialect {
				return openOn(t, db, prefix)
			})
		})
	}
}

func openOn(t *testing.T, db *bun.DB, prefix string) dialect.Dialect {
	var opts []postgres.Option
	if db.Dialect().Name() == bundialect.PG {
		opts = append(opts, postgres.WithListener(dbtest.PostgresListener(db)))
	}
	d, err := dialects.Open(context.Background(), db, prefix, opts...)
	require.NoError(t, err)
	return d
}
