package pgxlisten_test

import (
	"context"
	"database/sql"
	"log/slog"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/pglisten/pgxlisten"
	"github.com/seqbox/seqbox/processor"
)

// An outbox on pgx's database/sql driver that hears other processes'
// commits at once, through a pgx connection of its own.
func Example() {
	ctx := context.Background()
	dsn := "postgres://app@localhost:5432/app"
	sqldb, err := sql.Open("pgx", dsn)
	if err != nil {
		slog.Error("open", "error", err)
		return
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	ob, err := seqbox.New(db).Migrate(true).
		PostgresOptions(postgres.WithListener(pgxlisten.New(dsn))).
		Queue("orders", 8, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			return nil // deliver d
		})).
		Start(ctx)
	if err != nil {
		slog.Error("start the outbox", "error", err)
		return
	}
	defer func() { _ = ob.Stop(ctx) }()
}
