package sqlite

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

var schemaSQL = kit.SchemaSQL{
	TableExists: kit.Inline(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?name`),
	Version:     kit.Inline(`SELECT COALESCE(MAX(version), 0) FROM {schema_version}`),
	Record:      kit.Inline(`INSERT INTO {schema_version} (version) VALUES (?version)`),
	DropTable:   kit.Inline(`DROP TABLE IF EXISTS ?table`),
}

// lockSQL is the migration lock: SQLite has no named locks, and an
// immediate transaction on the pinned connection takes the write lock,
// which serialises migrations across processes.
type lockSQL struct {
	Begin  *kit.Stmt
	Commit *kit.Stmt
}

var migrationLock = lockSQL{
	Begin:  kit.Inline(`BEGIN IMMEDIATE`),
	Commit: kit.Inline(`COMMIT`),
}

// lockMigrations opens an immediate transaction on conn and returns its
// commit.
func lockMigrations(ctx context.Context, r *kit.Runner, conn bun.Conn) (func(context.Context) error, error) {
	if _, err := r.Exec(ctx, conn, migrationLock.Begin, nil); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := r.Exec(ctx, conn, migrationLock.Commit, nil)
		return err
	}, nil
}

// schemaStatements renders the embedded schema for prefix without a
// database: the statements SchemaMigrate runs, in order.
func schemaStatements(prefix string) ([]string, error) {
	s, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return nil, err
	}
	return s.Render(prefix)
}

// SchemaMigrate applies the missing migrations under the migration lock.
func (d *sqliteDialect) SchemaMigrate(ctx context.Context, _ *dialect.SchemaMigrateParams) error {
	return schemaSQL.Migrate(ctx, d.Runner, lockMigrations)
}

// SchemaStatus reads the schema version without creating anything.
func (d *sqliteDialect) SchemaStatus(ctx context.Context, _ *dialect.SchemaStatusParams) (dialect.SchemaStatus, error) {
	return schemaSQL.Status(ctx, d.Runner)
}

// SchemaDrop drops every table of this prefix.
func (d *sqliteDialect) SchemaDrop(ctx context.Context, _ *dialect.SchemaDropParams) error {
	return schemaSQL.Drop(ctx, d.Runner)
}
