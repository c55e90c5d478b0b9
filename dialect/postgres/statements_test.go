package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/golden"
	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/outbox"
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
	keys := kit.PGPack([][]byte{[]byte("customer-42"), nil})
	payloads := kit.PGPack([][]byte{[]byte("{}"), []byte("{}")})
	headers := kit.PGPack([][]byte{[]byte(`{"tenant":"acme"}`), nil})
	bodyIDs := kit.PGPack([][]byte{{0x01, 0x9b, 0x3c, 0x7f}, {0x01, 0x9b, 0x3c, 0x80}})
	overrides := map[string]any{
		// Arrays are one text value, cast in the statement.
		"moves.ManyLock?pids":          pgArray(7, 8),
		"moves.ManySelect?pids":        pgArray(7, 8),
		"moves.ManyUpdate?pids":        pgArray(7, 8),
		"GroupSQL.ReadRanges?pids":     pgArray(7, 8),
		"GroupSQL.LockLeasable?pids":   pgArray(7, 8),
		"GroupSQL.LockOwned?pids":      pgArray(7, 8),
		"vacuums.Delete?pids":          pgArray(7, 8),
		"WriteSQL.InsertOutgoing?pids": pgArray(7, 8),
		// An enqueue's columns: the ids end to end, keys, payloads and
		// headers packed; a second message without a key or headers, and a
		// payload type that needs quoting.
		"ids":                           []byte{0x01, 0x9b, 0x3c, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x01, 0x9b, 0x3c, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
		"inserts.Bodies?keys":           keys.Blob,
		"inserts.Both?keys":             keys.Blob,
		"key_spans":                     keys.Spans,
		"types":                         kit.PGTextArray([][]byte{[]byte("order.created"), []byte(`say "hi"`)}),
		"payloads":                      payloads.Blob,
		"payload_spans":                 payloads.Spans,
		"inserts.Bodies?headers":        headers.Blob,
		"inserts.Both?headers":          headers.Blob,
		"header_spans":                  headers.Spans,
		"inserts.Bodies?pids":           pgArray(7, 8),
		"inserts.Incoming?pids":         pgArray(7, 8),
		"inserts.Both?pids":             pgArray(7, 8),
		"WriteSQL.InsertOutgoing?seqs":  pgArray(1201, 1202),
		"body_ids":                      bodyIDs.Blob,
		"body_id_spans":                 bodyIDs.Spans,
		"gens":                          pgArray(0, 0),
		"bounds":                        pgArray(1201, 1202),
		"olds":                          pgArray(1101, 1102),
		"los":                           pgArray(41, 56),
		"his":                           pgArray(141, 156),
		"froms":                         pgArray(0, 12),
		"tos":                           pgArray(40, 30),
		"moved":                         tidArray([]kit.MovedRow{{IncomingTID: "(0,1)"}, {IncomingTID: "(0,2)"}}),
		"bound":                         int64(1201),
		"old":                           int64(1101),
		"rotations.ProcessorFloor?rows": 128,
		"keys":                          bun.List([][]byte{[]byte("customer-42"), []byte("customer-43")}),
		"more":                          bun.List([]int64{7}),
		"headers":                       `{"tenant":"acme"}`,
		"schemaSQL.TableExists?name":    "seqbox_schema_version",
		"migrateLock.Lock?name":         "seqbox_migrate",
		"migrateLock.Unlock?name":       "seqbox_migrate",
		"vacuums.TryLock?name":          "seqbox_table_vacuum",
		"vacuums.Unlock?name":           "seqbox_table_vacuum",
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
		// The rotator's (rotate.go).
		"gen":                             int16(1),
		"body":                            bun.Ident("seqbox_body_g1"),
		"outgoing":                        bun.Ident("seqbox_outgoing_g1"),
		"interval_us":                     int64(30_000_000),
		"hold_us":                         int64(1_500_000),
		"timeout":                         "100ms",
		"since":                           int64(7420),
		"marker":                          "seqbox-floor-",
		"rotations.FloorBody?rows":        256,
		"rotations.FloorOutgoing?rows":    256,
		"rotations.FloorDelete?rows":      256,
		"rotations.RotateSQL.Switch?from": 0,
		"rotations.RotateSQL.Switch?to":   1,
		"rotations.RotateSQL.Demote?keep": 2,
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

// TestSynchronousCommitOption: the option binds its value to every
// statement that sets synchronous_commit, leaves every text as it is
// (prepared statements stay prepared once), and refuses what PostgreSQL
// would not take.
func TestSynchronousCommitOption(t *testing.T) {
	t.Parallel()
	gen := schema.NewQueryGen(pgdialect.New())
	texts := func(opts ...Option) (map[string]string, map[string]string) {
		dd, err := New(nil, dialect.DefaultPrefix, opts...)
		require.NoError(t, err)
		r := dd.(*pgDialect).Runner
		raw, rendered := map[string]string{}, map[string]string{}
		for _, c := range r.Statements() {
			raw[c.Name] = c.Text
			if len(c.Bound) == 0 {
				continue
			}
			require.Equal(t, []string{"sync_commit"}, c.Bound, c.Name)
			require.Contains(t, c.Text, "set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true)", c.Name)
			if c.Stmt.Mode == kit.Prepared {
				require.Contains(t, c.Params, "sync_commit", "%s binds the setting as a parameter", c.Name)
			}
			if len(c.Lists) > 0 || len(c.Names) > 0 {
				continue // rendered whole by TestStatements; the bound value is what matters here
			}
			s, err := r.Render(gen, c.Stmt, nil)
			require.NoError(t, err, c.Name)
			rendered[c.Name] = s
		}
		return raw, rendered
	}
	defRaw, defRendered := texts()
	var setting []string
	for name, text := range defRaw {
		if strings.Contains(text, "'synchronous_commit'") {
			setting = append(setting, name)
		}
	}
	slices.Sort(setting)
	require.Equal(t, []string{"GroupSQL.Ack", "GroupSQL.AckLease", "GroupSQL.TakeLease", "ProcessorSQL.Lock",
		"leases.Ack", "leases.AckLease", "leases.Batch", "moves.Lock", "moves.ManyLock", "vacuums.DeleteSettings"}, setting,
		"the statements that open seqbox's own transactions")
	require.Contains(t, defRendered["vacuums.DeleteSettings"], "CAST('off' AS text)", "the default is off")

	for mode, want := range map[SynchronousCommit]string{
		"":                           "CAST('off' AS text)",
		SynchronousCommitOff:         "CAST('off' AS text)",
		SynchronousCommitLocal:       "CAST('local' AS text)",
		SynchronousCommitRemoteWrite: "CAST('remote_write' AS text)",
		SynchronousCommitOn:          "CAST('on' AS text)",
		SynchronousCommitRemoteApply: "CAST('remote_apply' AS text)",
		SynchronousCommitInherit:     "CAST(NULL AS text)",
	} {
		raw, rendered := texts(WithSynchronousCommit(mode))
		require.Equal(t, defRaw, raw, "%q changed a statement's text", mode)
		require.Contains(t, rendered["vacuums.DeleteSettings"], want, "mode %q", mode)
	}
	for _, bad := range []SynchronousCommit{"OFF", "true", "remote", "inherit "} {
		_, err := New(nil, dialect.DefaultPrefix, WithSynchronousCommit(bad))
		require.ErrorIs(t, err, outbox.ErrInvalidConfig, "%q", bad)
		var ce *outbox.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "PostgresOptions", ce.Field)
	}
}
