package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect/internal/golden"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// TestStatements pins every statement this dialect runs, rendered with
// sample values, in testdata/sql/sqlite.sql:
// go test ./dialect/sqlite -run TestStatements -update
func TestStatements(t *testing.T) {
	t.Parallel()
	d, err := New(nil, "seqbox_") // New does not touch the database
	require.NoError(t, err)
	bodies := bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x7e}, {0x01, 0x9b, 0x3c, 0x7f}})
	overrides := map[string]any{
		// A move deletes the incoming rows it read by id.
		"moved": bun.List([]int64{11, 12}),
		// The partitions of a several-partition move are one JSON array.
		"MoveSQL.SelectHeads?pids": kit.JSONArray([]int64{7, 8}),
		// Keys, bodies and replays are byte strings.
		"keys":                                 bun.List([][]byte{[]byte("order-41"), []byte("order-42")}),
		"PurgeSQL.DeleteBodies?ids":            bodies,
		"PurgeSQL.BlankBodies?ids":             bodies,
		"ProcessorSQL.DeadLetters.Resolve?ids": bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x80}}),
		// A dead letter's status moves between names; its id is a number.
		"DeadLetterSQL.SetStatus?from":   "pending",
		"DeadLetterSQL.SetStatus?to":     "discarded",
		"DeadLetterSQL.SetReplayed?from": "pending",
		"DeadLetterSQL.SetReplayed?to":   "replayed",
		"DeadLetterSQL.SetReplayed?id":   int64(11),
		// One generation's tables (rotate.go), and the rotator's values.
		"gen":                             int16(1),
		"body":                            bun.Ident("seqbox_body_g1"),
		"outgoing":                        bun.Ident("seqbox_outgoing_g1"),
		"view":                            bun.Ident("seqbox_body"),
		"interval_us":                     int64(30_000_000),
		"hold_us":                         int64(1_500_000),
		"rotations.RotateSQL.Switch?from": 0,
		"rotations.RotateSQL.Switch?to":   1,
		"rotations.RotateSQL.Demote?keep": 2,
	}
	golden.Statements(t, "sqlite", d.(*sqliteDialect).Runner, schema.NewQueryGen(sqlitedialect.New()), overrides, *update)
}
