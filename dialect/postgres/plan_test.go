package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestMoveReadsOnlyTheHead: a move's read of incoming visits the head of
// the partition, as many rows as it takes, whatever the backlog behind it
// and whatever the statistics say. A sort key the index cannot provide
// (once, ORDER BY resolved "xid" to the output column, a bigint cast) reads
// the partition's whole backlog on every move, so a drain's cost per
// message grows with the backlog (docs/ARCHITECTURE.md, "Plans that do not
// depend on statistics").
func TestMoveReadsOnlyTheHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.Postgres(t)
	d, err := postgres.New(db, dbtest.Prefix(t))
	require.NoError(t, err)
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	t.Cleanup(func() { _ = d.SchemaDrop(context.WithoutCancel(ctx), &dialect.SchemaDropParams{}) })

	const backlog, limit = 5000, 10
	incoming := bun.Ident(d.Tables().Incoming)
	for _, pid := range []int64{1, 2} {
		_, err := db.ExecContext(ctx, `INSERT INTO ? (partition_id, body_id)
SELECT ?, decode(lpad(to_hex(g), 32, '0'), 'hex') FROM generate_series(1, ?) g`, incoming, pid, backlog)
		require.NoError(t, err)
	}
	queries, err := postgres.RenderMoveReads(d, db, []int64{1, 2}, limit)
	require.NoError(t, err)
	// Without statistics (autovacuum off, a new table) and with them.
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := db.ExecContext(ctx, `ANALYZE ?`, incoming)
			require.NoError(t, err)
		}
		for name, query := range queries {
			read := rowsRead(t, db, query, d.Tables().Incoming)
			require.LessOrEqualf(t, read, 2*2*limit, "%s (analyzed %v) read %d rows of incoming for a head of %d per partition:\n%s",
				name, analyzed, read, limit, query)
		}
	}
}

// rowsRead runs query under EXPLAIN ANALYZE in a transaction set up as a
// move's (bitmap scans off) and returns the rows its scans of table
// produced, over all loops.
func rowsRead(t *testing.T, db *bun.DB, query, table string) int {
	t.Helper()
	var out []byte
	err := db.RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_bitmapscan = off`); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+query).Scan(&out)
	})
	require.NoError(t, err)
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	require.Len(t, plans, 1)
	return plans[0].Plan.rows(table)
}

type planNode struct {
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) rows(table string) int {
	total := 0
	if n.Relation == table {
		total += int(n.Rows * n.Loops)
	}
	for _, c := range n.Plans {
		total += c.rows(table)
	}
	return total
}
