package postgres_test

import (
	"context"
	"database/sql"
	"log/slog"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/processor"
)

// An outbox on a primary with a synchronous standby (docs/FAILOVER.md):
// the DSN names both servers, so that new connections find whichever
// accepts writes after a failover, and seqbox's own commits wait for the
// standby too, so that a failover never hands a seq a handler has seen to
// another message. It needs the servers, so it has no output.
func ExampleWithSynchronousCommit() {
	ctx := context.Background()
	dsn := "postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write&connect_timeout=5"
	sqldb, err := sql.Open("pgx", dsn)
	if err != nil {
		slog.Error("open", "error", err)
		return
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	ob, err := seqbox.New(db).Migrate(true).
		PostgresOptions(postgres.WithSynchronousCommit(postgres.SynchronousCommitOn)).
		Queue("orders", 8, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			return nil // deliver d; d.Seq stays d's across a failover
		})).
		Start(ctx)
	if err != nil {
		slog.Error("start the outbox", "error", err)
		return
	}
	defer func() { _ = ob.Stop(ctx) }()
}
