package kit

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// Schema is a dialect's migrations as written: migration/000_bootstrap.sql
// and the numbered migration/NNN_*.sql files, with {table} words and
// statements separated by a line "-- seqbox:split".
type Schema struct {
	Bootstrap  string
	Migrations []string
}

// LoadSchema reads a dialect's embedded migrations, in order.
func LoadSchema(fsys fs.FS) (Schema, error) {
	names, err := fs.Glob(fsys, "migration/*.sql")
	if err != nil {
		return Schema{}, err
	}
	sort.Strings(names)
	var s Schema
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return Schema{}, fmt.Errorf("seqbox: read %s: %w", name, err)
		}
		if name == "migration/000_bootstrap.sql" {
			s.Bootstrap = string(b)
			continue
		}
		s.Migrations = append(s.Migrations, string(b))
	}
	if s.Bootstrap == "" || len(s.Migrations) == 0 {
		return Schema{}, fmt.Errorf("seqbox: embedded migrations missing")
	}
	return s, nil
}

// Render returns the schema's statements for a prefix without a database:
// the bootstrap's, then every migration's, in order (golden files).
func (s Schema) Render(prefix string) ([]string, error) {
	tables, err := dialect.NewTables(prefix)
	if err != nil {
		return nil, err
	}
	boot, migs, err := s.render(tableWords(tables))
	if err != nil {
		return nil, err
	}
	return flatten(boot, migs), nil
}

// render keeps the migrations apart: they are applied and recorded one
// version at a time.
func (s Schema) render(words map[string]string) (boot []string, migs [][]string, err error) {
	if boot, err = split(s.Bootstrap, words); err != nil {
		return nil, nil, err
	}
	for _, m := range s.Migrations {
		stmts, err := split(m, words)
		if err != nil {
			return nil, nil, err
		}
		migs = append(migs, stmts)
	}
	return boot, migs, nil
}

func split(src string, words map[string]string) ([]string, error) {
	var unknown []string
	text := tableWord.ReplaceAllStringFunc(src, func(m string) string {
		if t, ok := words[m[1:len(m)-1]]; ok {
			return t
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("seqbox: render schema: unknown table word %s", strings.Join(unknown, ", "))
	}
	var out []string
	for _, s := range strings.Split(text, "-- seqbox:split") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

func flatten(boot []string, migs [][]string) []string {
	out := append([]string(nil), boot...)
	for _, m := range migs {
		out = append(out, m...)
	}
	return out
}

// SchemaSQL is the statements of the schema operations.
type SchemaSQL struct {
	// TableExists counts the tables named ?name in the current schema.
	TableExists *Stmt
	// Version reads the schema version (0 for an empty table).
	Version *Stmt
	// Record records ?version as applied.
	Record *Stmt
	// DropTable drops ?table (a bun.Ident) if it exists.
	DropTable *Stmt
	// DropView drops view ?view if it exists, where body and outgoing are
	// views of their generations' tables (MariaDB, SQLite; DropRotated):
	// DROP TABLE leaves a view alone.
	DropView *Stmt `kit:"optional"`
}

// SchemaLock takes a database-wide lock for migrations on a pinned
// connection and returns its release; each database has its own way.
type SchemaLock func(ctx context.Context, r *Runner, conn bun.Conn) (func(context.Context) error, error)

// Status reads the schema version without creating anything.
func (s *SchemaSQL) Status(ctx context.Context, r *Runner) (dialect.SchemaStatus, error) {
	st := dialect.SchemaStatus{Latest: len(r.migs)}
	var n int
	if err := r.Query(ctx, r.DB(), s.TableExists, Args{"name": r.tables.SchemaVersion}, &n); err != nil {
		return st, dialect.Wrap(err, "schema status")
	}
	if n == 0 {
		return st, nil
	}
	if err := r.Query(ctx, r.DB(), s.Version, nil, &st.Current); err != nil {
		return st, dialect.Wrap(err, "schema status")
	}
	return st, nil
}

// Migrate applies the missing migrations under lock.
func (s *SchemaSQL) Migrate(ctx context.Context, r *Runner, lock SchemaLock) (err error) {
	conn, err := r.DB().Conn(ctx)
	if err != nil {
		return dialect.Wrap(err, "migrate")
	}
	defer conn.Close()
	unlock, err := lock(ctx, r, conn)
	if err != nil {
		return dialect.Wrap(err, "migrate: take lock")
	}
	defer func() {
		if uerr := unlock(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = dialect.Wrap(uerr, "migrate: release lock")
		}
	}()
	for _, ddl := range r.boot {
		if _, err := conn.ExecContext(ctx, ddl); err != nil {
			return dialect.Wrap(err, "migrate: bootstrap")
		}
	}
	var current int
	if err := r.Query(ctx, conn, s.Version, nil, &current); err != nil {
		return dialect.Wrap(err, "migrate: read version")
	}
	if current > len(r.migs) {
		return fmt.Errorf("seqbox: migrate: schema version %d is newer than this release knows (%d): upgrade seqbox", current, len(r.migs))
	}
	for v := current; v < len(r.migs); v++ {
		// Every statement is idempotent (IF NOT EXISTS), so a migration that
		// died half-way on a database without transactional DDL re-runs cleanly.
		for _, ddl := range r.migs[v] {
			if _, err := conn.ExecContext(ctx, ddl); err != nil {
				return dialect.Wrap(err, fmt.Sprintf("migrate to version %d", v+1))
			}
		}
		if _, err := r.Exec(ctx, conn, s.Record, Args{"version": v + 1}); err != nil {
			return dialect.Wrap(err, fmt.Sprintf("migrate: record version %d", v+1))
		}
	}
	return nil
}

// DropRotated drops every table of the prefix where body and outgoing are
// views of three generations' tables (docs/ROTATION.md: MariaDB, SQLite):
// the two views, the tables Drop drops, the generations' tables and the
// generations table.
func (s *SchemaSQL) DropRotated(ctx context.Context, r *Runner) error {
	t := r.Tables()
	for _, view := range []string{t.Body, t.Outgoing} {
		if _, err := r.Write(ctx, s.DropView, Args{"view": bun.Ident(view)}); err != nil {
			return dialect.Wrap(err, "drop "+view)
		}
	}
	if err := s.Drop(ctx, r); err != nil {
		return err
	}
	tables := []bun.Ident{bun.Ident(t.Generations)}
	for g := range Generations {
		tables = append(tables, GenTable(t.Body, g), GenTable(t.Outgoing, g))
	}
	for _, table := range tables {
		if _, err := r.Write(ctx, s.DropTable, Args{"table": table}); err != nil {
			return dialect.Wrap(err, "drop "+string(table))
		}
	}
	return nil
}

// Drop drops every table of the prefix.
func (s *SchemaSQL) Drop(ctx context.Context, r *Runner) error {
	all := r.tables.All()
	for i := len(all) - 1; i >= 0; i-- {
		if _, err := r.Write(ctx, s.DropTable, Args{"table": bun.Ident(all[i])}); err != nil {
			return dialect.Wrap(err, "drop "+all[i])
		}
	}
	return nil
}
