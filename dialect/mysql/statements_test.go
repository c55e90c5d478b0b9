package mysql

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/golden"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// TestStatements pins every statement this dialect runs, rendered with
// fixed sample values, in testdata/sql/mysql.sql (docs/ARCHITECTURE.md,
// "The SQL layer"). It needs no database: the dialect is built for a
// server with a 64 MiB packet.
func TestStatements(t *testing.T) {
	t.Parallel()
	d, err := newDialect(nil, dialect.DefaultPrefix, server{packet: 64 << 20})
	require.NoError(t, err)
	messageIDs := bun.List([][]byte{{0x01, 0x9b, 0x3c, 0x7f}, {0x01, 0x9b, 0x3c, 0x80}})
	overrides := map[string]any{
		// One JSON value where the samples have a list.
		"moved":                        kit.JSONArray([]int64{11, 12}),
		"keys":                         kit.HexJSONArray([][]byte{[]byte("customer-42"), []byte("customer-43")}),
		"ranges":                       kit.RangesJSON([]dialect.VacuumRange{{PartitionID: 7, FromSeq: 40, ToSeq: 140}, {PartitionID: 8, FromSeq: 0, ToSeq: 12}}),
		"more":                         bun.List([]int64{7}),
		"MoveSQL.SelectIncoming?after": int64(40),
		// Values of another type than the sample of the same name.
		"migrationLockSQL.Take?name":           "seqbox_migrate",
		"migrationLockSQL.Release?name":        "seqbox_migrate",
		"enqueueStmts.PendingList?ids":         messageIDs,
		"ProcessorSQL.DeadLetters.Resolve?ids": messageIDs,
		"DeadLetterSQL.SetStatus?from":         dialect.DeadLetterPending,
		"DeadLetterSQL.SetStatus?to":           dialect.DeadLetterResolved,
		"DeadLetterSQL.SetReplayed?from":       dialect.DeadLetterPending,
		"DeadLetterSQL.SetReplayed?to":         dialect.DeadLetterReplayed,
		"DeadLetterSQL.SetReplayed?id":         int64(11),
		"PurgeSQL.DeleteBodies?ids":            messageIDs,
		"PurgeSQL.BlankBodies?ids":             messageIDs,
		"PurgeSQL.BlankBodies?payload":         []byte{},
		// One generation's tables (rotate.go), and the rotator's values.
		"gen":                             int16(1),
		"body":                            bun.Ident("seqbox_body_g1"),
		"outgoing":                        bun.Ident("seqbox_outgoing_g1"),
		"view":                            bun.Ident("seqbox_body"),
		"interval_us":                     int64(30_000_000),
		"hold_us":                         int64(1_500_000),
		"timeout":                         0.1,
		"rotations.Turn?name":             "seqbox_rotate",
		"rotations.Release?name":          "seqbox_rotate",
		"rotations.Truncate?table":        bun.Ident("seqbox_outgoing_g1"),
		"rotations.RotateSQL.Switch?from": 0,
		"rotations.RotateSQL.Switch?to":   1,
		"rotations.RotateSQL.Demote?keep": 2,
	}
	for i := range headArms { // the head read's arms: two partitions, the rest unused
		overrides["MoveSQL.SelectHeads?p"+strconv.Itoa(i)], overrides["MoveSQL.SelectHeads?a"+strconv.Itoa(i)] = int64(0), int64(0)
	}
	overrides["MoveSQL.SelectHeads?p0"], overrides["MoveSQL.SelectHeads?a0"] = int64(7), int64(40)
	overrides["MoveSQL.SelectHeads?p1"], overrides["MoveSQL.SelectHeads?a1"] = int64(8), int64(0)
	golden.Statements(t, "mysql", d.Runner, schema.NewQueryGen(mysqldialect.New()), overrides, *update)
}
