package pgdriverlisten_test

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/pglisten/pgdriverlisten"
	"github.com/seqbox/seqbox/processor"
)

// An outbox on bun's pgdriver that hears other processes' commits at
// once, through a pgdriver connection of its own.
func Example() {
	ctx := context.Background()
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN("postgres://app@localhost:5432/app?sslmode=disable")))
	db := bun.NewDB(sqldb, pgdialect.New())
	ob, err := seqbox.New(db).Migrate(true).
		PostgresOptions(postgres.WithListener(pgdriverlisten.New(db))).
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
