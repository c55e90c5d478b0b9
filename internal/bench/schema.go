package bench

import (
	"context"
	"fmt"
	mrand "math/rand/v2"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// schemaFigure is a schema A/B for the enqueue write path: how close to the
// one-table INSERT ceiling could an enqueue get if it wrote one row per
// message instead of seqbox's two (body + incoming)? Three plain-SQL write
// paths with no library code, alternated run by run in one window, each
// against the one-table baseline measured in the same rounds:
//
//   - the baseline: a body-shaped table, nothing for order;
//   - one ordered table: the same row plus what per-partition FIFO of
//     committed rows needs at the least, an auto-increment id, the partition
//     id and an index on (partition_id, id) — on PostgreSQL the inserting
//     transaction's xid in that index, as seqbox's incoming has;
//   - seqbox's two rows, body and incoming, in its own tables.
//
// Batched (Batch per transaction, 4 producers) and single (1 per
// transaction, 8 producers), the enqueue figures' widest shapes.
func (b *bencher) schemaFigure(ctx context.Context, _ int) ([]Result, error) {
	var out []Result
	for _, shape := range []struct{ batch, producers int }{{b.opts.Batch, 4}, {1, 8}} {
		variant := fmt.Sprintf("%d/tx, %s", shape.batch, plural(shape.producers, "producer"))
		var base, ordered, two []float64
		var baseUse, orderedUse, twoUse usageStats
		for i := range b.opts.Runs {
			for _, w := range []struct {
				name  string
				rates *[]float64
				use   *usageStats
				run   func(ctx context.Context, producers, batch int, m *meter) (float64, error)
			}{
				{"one table", &base, &baseUse, b.baselineRun},
				{"one ordered table", &ordered, &orderedUse, b.orderedTableRun},
				{"two rows (body + incoming)", &two, &twoUse, b.twoRowBaselineRun},
			} {
				rate, err := b.timed(b.runLabel(ScenarioSchema, variant+", "+w.name, i), w.use, func(m *meter) (float64, error) {
					return w.run(ctx, shape.producers, shape.batch, m)
				})
				if err != nil {
					return out, err
				}
				*w.rates = append(*w.rates, rate)
			}
		}
		baseStat := newStat(base)
		for _, r := range []struct {
			name  string
			rates []float64
			use   *usageStats
		}{
			{"one ordered table", ordered, &orderedUse},
			{"two rows (body + incoming)", two, &twoUse},
		} {
			res := Result{Scenario: ScenarioSchema, Variant: variant + ", " + r.name, MsgsPerSec: newStat(r.rates), Baseline: &baseStat,
				Extra: map[string]any{}}
			if baseStat.Median > 0 {
				res.Ratio = res.MsgsPerSec.Median / baseStat.Median
			}
			r.use.put(res.Extra)
			out = append(out, res)
		}
		res := Result{Scenario: ScenarioSchema, Variant: variant + ", one table (the baseline)", MsgsPerSec: baseStat, Extra: map[string]any{}}
		baseUse.put(res.Extra)
		out = append(out, res)
	}
	return out, nil
}

// orderedTableRun writes each message as one row of an ordered table
// (schemaFigure), with the same transactions, chunks and concurrency as
// the baseline.
func (b *bencher) orderedTableRun(ctx context.Context, producers, batch int, m *meter) (float64, error) {
	partitions := int64(b.opts.Partitions)
	return b.plainTableRun(ctx, producers, batch, m, "ordered", createOrdered,
		func(ctx context.Context, tx bun.Tx, table bun.Ident, rows []baseRow, now string) error {
			_, err := tx.NewRaw("INSERT INTO ? (id, partition_id, payload_type, payload, headers, created_at) VALUES ?",
				table, baseValuesWith(rows, "(?, ?, ?, ?, NULL, "+now+")", func(r baseRow) []any {
					return []any{r.id, 1 + mrand.Int64N(partitions), r.payloadType, r.payload}
				})).Exec(ctx)
			return err
		})
}

// createOrdered makes the one ordered table: the baseline's columns plus
// an auto-increment id and the partition id, indexed for a FIFO read per
// partition (on PostgreSQL with the inserting transaction's xid first, as
// seqbox's incoming).
func createOrdered(ctx context.Context, db *bun.DB, name dialect.Name, table string) error {
	t, index := bun.Ident(table), bun.Ident(table+"_partition")
	type stmt struct {
		sql  string
		args []any
	}
	ddl := map[dialect.Name][]stmt{
		dialect.Postgres: {
			{"CREATE TABLE ? (seq_id BIGSERIAL NOT NULL, id BYTEA PRIMARY KEY, partition_id BIGINT NOT NULL, " +
				"xid xid8 NOT NULL DEFAULT pg_current_xact_id(), payload_type VARCHAR(255) NOT NULL, payload BYTEA NOT NULL, " +
				"headers TEXT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())", []any{t}},
			{"CREATE INDEX ? ON ? (partition_id, xid, seq_id)", []any{index, t}},
		},
		dialect.MySQL: {
			{"CREATE TABLE ? (seq_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, id BINARY(16) NOT NULL UNIQUE, partition_id BIGINT NOT NULL, " +
				"payload_type VARCHAR(255) CHARACTER SET ascii NOT NULL, payload MEDIUMBLOB NOT NULL, headers MEDIUMTEXT NULL, " +
				"created_at DATETIME(6) NOT NULL, KEY (partition_id, seq_id)) ENGINE=InnoDB", []any{t}},
		},
		dialect.SQLite: {
			{"CREATE TABLE ? (seq_id INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, partition_id INTEGER NOT NULL, " +
				"payload_type TEXT NOT NULL, payload BLOB NOT NULL, headers TEXT NULL, created_at TIMESTAMP NOT NULL)", []any{t}},
			{"CREATE INDEX ? ON ? (partition_id, seq_id)", []any{index, t}},
		},
	}[name]
	if ddl == nil {
		return fmt.Errorf("bench: no ordered table for %s", name)
	}
	for _, s := range ddl {
		if _, err := db.NewRaw(s.sql, s.args...).Exec(ctx); err != nil {
			return fmt.Errorf("bench: create %s: %w", table, err)
		}
	}
	return nil
}
