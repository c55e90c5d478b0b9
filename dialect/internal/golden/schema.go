// Package golden checks what a dialect sends against golden files at the
// repository root: its schema in testdata/schema/<dialect>.sql
// (docs/ARCHITECTURE.md, "Tables and locks") and every statement it runs,
// rendered with fixed sample values, in testdata/sql/<dialect>.sql ("The
// SQL layer"). A change to a migration or a statement shows up as a
// reviewable diff. Each dialect's own tests call Schema and Statements;
// `go test ./dialect/... -update` rewrites the files.
package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// Render is a dialect's schema renderer: the statements SchemaMigrate runs
// for a prefix, in order.
type Render func(prefix string) ([]string, error)

// joinStatements is the golden file format: one statement per paragraph,
// each ended by ';' so the file can be fed to a database client as is.
func joinStatements(stmts []string) string {
	return strings.Join(stmts, ";\n\n") + ";\n"
}

// Schema compares render's schema with testdata/schema/<name>.sql (rewriting
// it when update is set) and checks the prefix is applied everywhere and
// refused when invalid.
func Schema(t *testing.T, name string, render Render, update bool) {
	t.Run("golden", func(t *testing.T) {
		stmts, err := render(dialect.DefaultPrefix)
		require.NoError(t, err)
		require.NotEmpty(t, stmts)
		got := joinStatements(stmts)
		path := filepath.Join("..", "..", "testdata", "schema", name+".sql")
		if update {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			return
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run: go test ./dialect/%s -run TestSchema -update", name)
		require.Equal(t, string(want), got, "schema changed; if intended, regenerate with -update and review the diff")
	})
	t.Run("prefix", func(t *testing.T) {
		const prefix = "acme_q_"
		tables, err := dialect.NewTables(prefix)
		require.NoError(t, err)
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
	t.Run("invalid prefix", func(t *testing.T) {
		for _, prefix := range []string{"", "Seqbox_", "1seqbox_", "seq-box_", "seq box", "seqbox_;drop", strings.Repeat("a", 33)} {
			stmts, err := render(prefix)
			require.ErrorIs(t, err, dialect.ErrInvalidPrefix, "prefix %q", prefix)
			require.Nil(t, stmts, "prefix %q", prefix)
		}
	})
}
