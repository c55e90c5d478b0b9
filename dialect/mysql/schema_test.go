package mysql

import (
	"flag"
	"testing"

	"github.com/seqbox/seqbox/dialect/internal/golden"
)

// update rewrites testdata/schema/mysql.sql: go test ./dialect/mysql -run TestSchema -update
var update = flag.Bool("update", false, "rewrite the golden schema file from the embedded migrations")

// TestSchema pins the DDL this dialect creates (docs/ARCHITECTURE.md, "Tables and locks").
func TestSchema(t *testing.T) {
	t.Parallel()
	golden.Schema(t, "mysql", schemaStatements, *update)
}
