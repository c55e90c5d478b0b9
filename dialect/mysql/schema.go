package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// schemaSQL reads and records the schema version; the DDL itself is in
// migration/ (docs/ARCHITECTURE.md, "Tables and locks").
var schemaSQL = kit.SchemaSQL{
	TableExists: kit.Inline(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?name`),
	Version:     kit.Inline(`SELECT COALESCE(MAX(version), 0) FROM {schema_version}`),
	Record:      kit.Inline(`INSERT INTO {schema_version} (version) VALUES (?version)`),
	// The table's name is a value, quoted by bun as an identifier.
	DropTable: kit.Inline(`DROP TABLE IF EXISTS ?table`),
	// body and outgoing are views of their generations (migration 011).
	DropView: kit.Inline(`DROP VIEW IF EXISTS ?view`),
}

// migrationLockSQL is the migrations' database-wide lock: a named lock held
// by the session of one pinned connection, so that two processes starting
// together never run the same DDL at once (MySQL's DDL is not transactional).
type migrationLockSQL struct {
	// Take waits up to 120 s for lock ?name: 1 when taken, 0 on timeout.
	Take *kit.Stmt
	// Release releases lock ?name.
	Release *kit.Stmt
}

var migrationLock = migrationLockSQL{
	Take:    kit.Inline(`SELECT GET_LOCK(?name, 120)`),
	Release: kit.Inline(`SELECT RELEASE_LOCK(?name)`),
}

// lockMigrations takes the migration lock for the runner's prefix on conn.
func lockMigrations(ctx context.Context, r *kit.Runner, conn bun.Conn) (func(context.Context) error, error) {
	name := r.Tables().Prefix + "migrate"
	var got sql.NullInt64
	if err := r.Query(ctx, conn, migrationLock.Take, kit.Args{"name": name}, &got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("GET_LOCK(%q) timed out", name)
	}
	return func(ctx context.Context) error {
		_, err := r.Exec(ctx, conn, migrationLock.Release, kit.Args{"name": name})
		return err
	}, nil
}

// SchemaMigrate applies the missing migrations under the migration lock.
func (d *mysqlDialect) SchemaMigrate(ctx context.Context, _ *dialect.SchemaMigrateParams) error {
	return schemaSQL.Migrate(ctx, d.Runner, lockMigrations)
}

// SchemaStatus reads the schema version without creating anything.
func (d *mysqlDialect) SchemaStatus(ctx context.Context, _ *dialect.SchemaStatusParams) (dialect.SchemaStatus, error) {
	return schemaSQL.Status(ctx, d.Runner)
}

// SchemaDrop drops every table of the prefix: the views of body and
// outgoing, their generations' tables, and the generations table.
func (d *mysqlDialect) SchemaDrop(ctx context.Context, _ *dialect.SchemaDropParams) error {
	return schemaSQL.DropRotated(ctx, d.Runner)
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
