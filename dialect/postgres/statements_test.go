package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/golden"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// TestStatements pins every statement the dialect runs, rendered with
// fixed sample values, in testdata/sql/postgres.sql:
// go test ./dialect/postgres -run TestStatements -update
func TestStatements(t *testing.T) {
	t.Parallel()
	dd, err := New(nil, dialect.DefaultPrefix) // New does not touch the database
	require.NoError(t, err)
	d := dd.(*pgDialect)
	pgArray := func(ids ...int64) string { return kit.PGArray(ids) }
	overrides := map[string]any{
		// Arrays are one text value, cast in the statement.
		"moves.ManyLock?pids":        pgArray(7, 8),
		"moves.ManySelect?pids":      pgArray(7, 8),
		"moves.ManyUpdate?pids":      pgArray(7, 8),
		"GroupSQL.ReadRanges?pids":   pgArray(7, 8),
		"vacuums.Delete?pids":        pgArray(7, 8),
		"bounds":                     pgArray(1201, 1202),
		"los":                        pgArray(41, 56),
		"his":                        pgArray(141, 156),
		"froms":                      pgArray(0, 12),
		"tos":                        pgArray(40, 30),
		"moved":                      tidArray([]kit.MovedRow{{IncomingTID: "(0,1)"}, {IncomingTID: "(0,2)"}}),
		"bound":                      int64(1201),
		"keys":                       bun.List([][]byte{[]byte("customer-42"), []byte("customer-43")}),
		"more":                       bun.List([]int64{7}),
		"headers":                    `{"tenant":"acme"}`,
		"schemaSQL.TableExists?name": "seqbox_schema_version",
		"migrateLock.Lock?name":      "seqbox_migrate",
		"migrateLock.Unlock?name":    "seqbox_migrate",
		"vacuums.TryLock?name":       "seqbox_table_vacuum",
		"vacuums.Unlock?name":        "seqbox_table_vacuum",
		// A payload is the sender, "\x1f" and the ids; the sample leaves the
		// control character out of the golden file.
		"incoming":  "7,8",
		"sequenced": "7",
		"probe":     "ready",
		// Values whose shape differs from the shared samples' here.
		"pending.List?ids":                     bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x7f}, {0x01, 0x9b, 0x3c, 0x80}}),
		"ProcessorSQL.DeadLetters.Resolve?ids": bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x81}}),
		"PurgeSQL.DeleteBodies?ids":            bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x7f}, {0x01, 0x9b, 0x3c, 0x80}}),
		"PurgeSQL.BlankBodies?ids":             bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x7f}, {0x01, 0x9b, 0x3c, 0x80}}),
		"PurgeSQL.BlankBodies?payload":         []byte{},
		"DeadLetterSQL.SetStatus?to":           "resolved",
		"DeadLetterSQL.SetStatus?from":         "pending",
		"DeadLetterSQL.SetReplayed?to":         "replayed",
		"DeadLetterSQL.SetReplayed?from":       "pending",
		"DeadLetterSQL.SetReplayed?id":         int64(11),
	}
	golden.Statements(t, "postgres", d.Runner, schema.NewQueryGen(pgdialect.New()), overrides, *update)
}

// TestNewChecksEveryStatement: New fails, rather than the pipeline later,
// when a statement is malformed (an unknown table word, a bare ?).
func TestNewChecksEveryStatement(t *testing.T) {
	t.Parallel()
	_, err := New(nil, "app_") // New does not touch the database
	require.NoError(t, err)
}
