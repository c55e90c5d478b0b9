package postgres

import (
	"flag"
	"testing"

	"github.com/seqbox/seqbox/dialect/internal/golden"
	"github.com/stretchr/testify/require"
)

// update rewrites the golden files, testdata/schema/postgres.sql and
// testdata/sql/postgres.sql: go test ./dialect/postgres -update
var update = flag.Bool("update", false, "rewrite the golden schema and statement files")

// TestSchema pins the DDL this dialect creates (docs/ARCHITECTURE.md, "Tables and locks").
func TestSchema(t *testing.T) {
	t.Parallel()
	golden.Schema(t, "postgres", schemaStatements, *update)
}

// TestSchemaStatementsMatchDialect: the renderer and a dialect agree, so the
// golden file is what SchemaMigrate runs.
func TestSchemaStatementsMatchDialect(t *testing.T) {
	t.Parallel()
	d, err := New(nil, "golden_") // New does not touch the database
	require.NoError(t, err)
	want, err := schemaStatements("golden_")
	require.NoError(t, err)
	require.Equal(t, want, d.SchemaStatements())
}
