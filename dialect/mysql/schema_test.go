package mysql

import (
	"flag"
	"testing"

	"github.com/seqbox/seqbox/dialect/internal/golden"
)

// update rewrites the golden files testdata/schema/mysql.sql and
// testdata/sql/mysql.sql: go test ./dialect/mysql -run "TestSchema|TestStatements" -update
var update = flag.Bool("update", false, "rewrite the golden schema and statement files")

// TestSchema pins the DDL this dialect creates (docs/ARCHITECTURE.md, "Tables and locks").
func TestSchema(t *testing.T) {
	t.Parallel()
	golden.Schema(t, "mysql", schemaStatements, *update)
}
