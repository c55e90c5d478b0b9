package postgres

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// schemaSQL is the statements of the schema operations; the DDL itself is
// in migration/.
var schemaSQL = kit.SchemaSQL{
	TableExists: kit.Inline(`SELECT COUNT(*) FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name = ?name`),
	Version: kit.Inline(`SELECT COALESCE(MAX(version), 0) FROM {schema_version}`),
	Record:  kit.Inline(`INSERT INTO {schema_version} (version) VALUES (?version)`),
	// ?table is a bun.Ident: a name from Tables.All.
	DropTable: kit.Inline(`DROP TABLE IF EXISTS ?table`),
}

// migrateLock is the migration lock: a session advisory lock on the
// pinned connection, named ?name (the prefix's). Concurrent CREATE TABLE
// IF NOT EXISTS races on PostgreSQL without it.
type migrateLock struct {
	Lock   *kit.Stmt
	Unlock *kit.Stmt
}

var migrateLockSQL = migrateLock{
	Lock:   kit.Inline(`SELECT pg_advisory_lock(hashtext(?name))`),
	Unlock: kit.Inline(`SELECT pg_advisory_unlock(hashtext(?name))`),
}

// lockMigrations takes the migration lock (kit.SchemaLock).
func lockMigrations(ctx context.Context, r *kit.Runner, conn bun.Conn) (func(context.Context) error, error) {
	args := kit.Args{"name": r.Tables().Prefix + "migrate"}
	if _, err := r.Exec(ctx, conn, migrateLockSQL.Lock, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if _, err := r.Exec(ctx, conn, migrateLockSQL.Unlock, args); err != nil {
			return fmt.Errorf("pg_advisory_unlock: %w", err)
		}
		return nil
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
// Then it writes the generations' floors (rotate.go, floorPages): before
// any statement is planned on empty tables, whether or not rotation is on.
func (d *pgDialect) SchemaMigrate(ctx context.Context, _ *dialect.SchemaMigrateParams) error {
	if err := schemaSQL.Migrate(ctx, d.Runner, lockMigrations); err != nil {
		return err
	}
	rows, _, err := d.rotation().State(ctx, 0)
	if err != nil {
		return err
	}
	return d.restoreFloors(ctx, rows)
}

// SchemaStatus reads the schema version without creating anything.
func (d *pgDialect) SchemaStatus(ctx context.Context, _ *dialect.SchemaStatusParams) (dialect.SchemaStatus, error) {
	return schemaSQL.Status(ctx, d.Runner)
}

// SchemaDrop drops every table of the prefix, the generations of body
// and outgoing with their parents, and the tables only this dialect has:
// the generations and the move's bounds.
func (d *pgDialect) SchemaDrop(ctx context.Context, _ *dialect.SchemaDropParams) error {
	if err := schemaSQL.Drop(ctx, d.Runner); err != nil {
		return err
	}
	for _, table := range []string{d.Tables().Generations, boundTable(d.Tables())} {
		if _, err := d.Write(ctx, schemaSQL.DropTable, kit.Args{"table": bun.Ident(table)}); err != nil {
			return dialect.Wrap(err, "drop "+table)
		}
	}
	return nil
}
