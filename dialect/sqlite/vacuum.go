package sqlite

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// vacuumSQL prunes one range at a time, three statements each per
// generation (one generation's ?body and ?outgoing per run), in one
// transaction: statements are in-process calls here. DELETE … RETURNING
// plus an id list measured no faster (BENCHMARKS.md, "Figures behind design choices", "SQLite vacuum in two statements"),
// and an id list of 5,000 blobs is a 180 KB statement.
var vacuumSQL = kit.VacuumRangeSQL{
	Bodies:   kit.Inline(`DELETE FROM ?body WHERE id IN (SELECT body_id FROM ?outgoing WHERE partition_id = ?pid AND seq > ?from AND seq <= ?to)`),
	Outgoing: kit.Inline(`DELETE FROM ?outgoing WHERE partition_id = ?pid AND seq > ?from AND seq <= ?to`),
	// Monotonic: overlapping sweeps of two processes never move it back.
	SetPruned: kit.Inline(`UPDATE {vacuum_counter} SET pruned_seq = ?to WHERE partition_id = ?pid AND pruned_seq < ?to`),
}

// vacuumCounterStmts is the vacuum's read.
type vacuumCounterStmts struct {
	// Counters reads the partitions whose cursor is past what has been
	// pruned.
	Counters *kit.Stmt
}

var vacuumCounterSQL = vacuumCounterStmts{
	// None while the rotator holds the prune (rotate.go): truncation will
	// remove the rows.
	Counters: kit.Inline(`SELECT v.partition_id, v.pruned_seq, p.processed_seq FROM {vacuum_counter} v
JOIN {processor} p ON p.partition_id = v.partition_id WHERE p.processed_seq > v.pruned_seq
AND NOT EXISTS (SELECT 1 FROM {generations} g WHERE g.prune_held_until > strftime('%Y-%m-%d %H:%M:%f', 'now'))`),
}

// VacuumCounterList lists partitions with processed rows to prune.
func (d *sqliteDialect) VacuumCounterList(ctx context.Context, _ *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error) {
	return kit.VacuumCounters(ctx, d.Runner, vacuumCounterSQL.Counters)
}

// VacuumDelete deletes bodies, then outgoing rows, of every range in each
// generation (a row is in one; the others' deletes find nothing by their
// keys) and records each range as pruned, in one transaction.
func (d *sqliteDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	var total int64
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		total = 0
		for _, rg := range p.Ranges {
			for g := range kit.Generations {
				args := kit.GenTables(d.Tables(), g)
				args["pid"], args["from"], args["to"] = rg.PartitionID, rg.FromSeq, rg.ToSeq
				if _, err := d.Exec(ctx, tx, vacuumSQL.Bodies, args); err != nil {
					return err
				}
				delete(args, "body")
				n, err := d.Affected(ctx, tx, vacuumSQL.Outgoing, args)
				if err != nil {
					return err
				}
				total += n
			}
			if _, err := d.Exec(ctx, tx, vacuumSQL.SetPruned, kit.Args{"pid": rg.PartitionID, "to": rg.ToSeq}); err != nil {
				return err
			}
		}
		return nil
	})
	return int(total), err
}
