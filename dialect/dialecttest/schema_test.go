package dialecttest_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/mysql"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/dialect/sqlite"
)

// update rewrites the golden files instead of comparing against them:
// go test ./dialect/dialecttest -run TestSchemaGolden -update
var update = flag.Bool("update", false, "rewrite testdata/schema/*.sql from the embedded migrations")

// schemaRenderers are the package-level renderers of every dialect, by the
// golden file's base name.
func schemaRenderers() map[string]func(prefix string) ([]string, error) {
	return map[string]func(prefix string) ([]string, error){
		"postgres": postgres.SchemaStatements,
		"mysql":    mysql.SchemaStatements,
		"sqlite":   sqlite.SchemaStatements,
	}
}

// joinStatements is the golden file format: one statement per paragraph,
// each ended by ';' so the file can be fed to a database client as is.
func joinStatements(stmts []string) string {
	return strings.Join(stmts, ";\n\n") + ";\n"
}

// TestSchemaGolden pins the DDL each dialect creates: a change to a migration
// shows up as a reviewable diff of testdata/schema/<dialect>.sql (docs/ARCHITECTURE.md, "Tables and locks").
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	for name, render := range schemaRenderers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stmts, err := render(dialect.DefaultPrefix)
			require.NoError(t, err)
			require.NotEmpty(t, stmts)
			got := joinStatements(stmts)

			// The golden files live at the repository root, beside the design.
			path := filepath.Join("..", "..", "testdata", "schema", name+".sql")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run: go test ./dialect/dialecttest -run TestSchemaGolden -update")
			require.Equal(t, string(want), got, "schema changed; if intended, regenerate with -update and review the diff")
		})
	}
}

// TestSchemaStatementsMatchDialect checks that the package-level renderer and
// a constructed dialect agree, so golden files describe what SchemaMigrate runs.
func TestSchemaStatementsMatchDialect(t *testing.T) {
	t.Parallel()
	const prefix = "golden_"
	// New does not touch the database for these two dialects (MySQL's reads
	// the server version, so it is left out), so a nil *bun.DB is enough.
	pg, err := postgres.New(nil, prefix)
	require.NoError(t, err)
	lite, err := sqlite.New(nil, prefix)
	require.NoError(t, err)
	for name, d := range map[string]dialect.Dialect{"postgres": pg, "sqlite": lite} {
		stmts, err := schemaRenderers()[name](prefix)
		require.NoError(t, err)
		require.Equal(t, d.SchemaStatements(), stmts, name)
	}
}

func TestSchemaStatementsPrefix(t *testing.T) {
	t.Parallel()
	const prefix = "acme_q_"
	tables, err := dialect.NewTables(prefix)
	require.NoError(t, err)
	for name, render := range schemaRenderers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stmts, err := render(prefix)
			require.NoError(t, err)
			all := joinStatements(stmts)
			require.NotContains(t, all, dialect.DefaultPrefix, "a table or index kept the default prefix")
			for _, table := range tables.All() {
				require.Contains(t, all, "CREATE TABLE IF NOT EXISTS "+table+" (")
			}
			for _, s := range stmts {
				require.NotContains(t, s, "{{", "unrendered template action")
				require.NotContains(t, s, "seqbox:split", "split marker left in a statement")
			}
		})
	}
}

func TestSchemaStatementsInvalidPrefix(t *testing.T) {
	t.Parallel()
	invalid := []string{"", "Seqbox_", "1seqbox_", "seq-box_", "seq box", "seqbox_;drop", strings.Repeat("a", 33)}
	for name, render := range schemaRenderers() {
		for _, prefix := range invalid {
			stmts, err := render(prefix)
			require.ErrorIs(t, err, dialect.ErrInvalidPrefix, "%s: prefix %q", name, prefix)
			require.Nil(t, stmts, "%s: prefix %q", name, prefix)
		}
	}
}
