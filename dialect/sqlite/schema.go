package sqlite

import (
	"context"
	"errors"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

var schemaSQL = kit.SchemaSQL{
	TableExists: kit.Inline(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?name`),
	Version:     kit.Inline(`SELECT COALESCE(MAX(version), 0) FROM {schema_version}`),
	Record:      kit.Inline(`INSERT INTO {schema_version} (version) VALUES (?version)`),
	DropTable:   kit.Inline(`DROP TABLE IF EXISTS ?table`),
	// body and outgoing are views of their generations (migration 010).
	DropView: kit.Inline(`DROP VIEW IF EXISTS ?view`),
}

// lockSQL is the migration lock: SQLite has no named locks, and an
// immediate transaction on the pinned connection takes the write lock,
// which serialises migrations across processes. Every migration and its
// version record run in it.
type lockSQL struct {
	Begin    *kit.Stmt
	Commit   *kit.Stmt
	Rollback *kit.Stmt
}

var migrationLock = lockSQL{
	Begin:    kit.Inline(`BEGIN IMMEDIATE`),
	Commit:   kit.Inline(`COMMIT`),
	Rollback: kit.Inline(`ROLLBACK`),
}

// lockMigrations opens an immediate transaction on conn and returns its
// end: a commit once the schema is at the latest version (latest), else
// a rollback. kit's Migrate ends it after a failed run too, and a commit
// then would keep the part of a migration that ran before the failure,
// which may not run twice (010's RENAMEs): so each run is whole or
// nothing.
func lockMigrations(latest int) kit.SchemaLock {
	return func(ctx context.Context, r *kit.Runner, conn bun.Conn) (func(context.Context) error, error) {
		if _, err := r.Exec(ctx, conn, migrationLock.Begin, nil); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			var version int
			if err := r.Query(ctx, conn, schemaSQL.Version, nil, &version); err != nil || version < latest {
				_, rerr := r.Exec(ctx, conn, migrationLock.Rollback, nil)
				return errors.Join(err, rerr)
			}
			_, err := r.Exec(ctx, conn, migrationLock.Commit, nil)
			return err
		}, nil
	}
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
	return schemaSQL.Migrate(ctx, d.Runner, lockMigrations(d.migrations))
}

// SchemaStatus reads the schema version without creating anything.
func (d *sqliteDialect) SchemaStatus(ctx context.Context, _ *dialect.SchemaStatusParams) (dialect.SchemaStatus, error) {
	return schemaSQL.Status(ctx, d.Runner)
}

// SchemaDrop drops every table of the prefix: the views of body and
// outgoing, their generations' tables, and the generations table.
func (d *sqliteDialect) SchemaDrop(ctx context.Context, _ *dialect.SchemaDropParams) error {
	return schemaSQL.DropRotated(ctx, d.Runner)
}
