package seqbox

import (
	"context"

	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
)

// Migrations returns the seqbox schema as bun/migrate migrations, for
// applications that run their schema changes with bun/migrate instead of
// Migrate(true). Each seqbox schema change adds one entry; every entry
// brings the schema fully up to date under seqbox's own database lock, so
// an application that ran an older list picks up the new entries.
func Migrations(prefix string) *migrate.Migrations {
	up := func(ctx context.Context, m *migrate.Migrator, _ *migrate.Migration) error {
		d, err := dialects.Open(ctx, m.DB(), prefix)
		if err != nil {
			return err
		}
		return d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{})
	}
	ms := migrate.NewMigrations()
	ms.Add(migrate.Migration{
		Name: "20261121000001", Comment: "seqbox_schema_v1", Up: up,
		Down: func(ctx context.Context, m *migrate.Migrator, _ *migrate.Migration) error {
			d, err := dialects.Open(ctx, m.DB(), prefix)
			if err != nil {
				return err
			}
			return d.SchemaDrop(ctx, &dialect.SchemaDropParams{})
		},
	})
	// Later schema changes: each entry brings the schema up to date; rolling
	// one back keeps it (the v1 entry's Down drops the tables).
	keep := func(context.Context, *migrate.Migrator, *migrate.Migration) error { return nil }
	for _, e := range []struct{ name, comment string }{
		{"20261122000001", "seqbox_schema_utf8mb4_text"},
		{"20261122000002", "seqbox_schema_flat_cost"},
		{"20261123000001", "seqbox_schema_dead_letter_actions"},
		{"20261123000002", "seqbox_schema_vacuum_truncate_all"},
		{"20261123000003", "seqbox_schema_processor_park"},
		{"20261123000004", "seqbox_schema_message_key"},
		{"20261123000005", "seqbox_schema_dedup_keys"},
		{"20261123000006", "seqbox_schema_purge"},
		{"20261124000001", "seqbox_schema_dead_letter_message_id"},
		{"20261124000002", "seqbox_schema_drop_partition_sequence"},
		{"20261124000003", "seqbox_schema_rotated_generations"},
		{"20261128000001", "seqbox_schema_pending_by_partition"},
		{"20261128000002", "seqbox_schema_incoming_without_primary_key"},
		{"20261128000003", "seqbox_schema_partition_bounds"},
		{"20261128000004", "seqbox_schema_processor_versions"},
		{"20261128000005", "seqbox_schema_incoming_stops"},
	} {
		ms.Add(migrate.Migration{Name: e.name, Comment: e.comment, Up: up, Down: keep})
	}
	return ms
}
