package mysql

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// vacuumStmts prune every range of a sweep in two statements, whatever
// their number. The ranges are one JSON value [[pid,from,to],…] (?ranges,
// kit.RangesJSON), read as a table by JSON_TABLE.
type vacuumStmts struct {
	// Counters lists the partitions whose cursor is past what is pruned.
	Counters *kit.Stmt
	// Delete deletes the outgoing and body rows of every range.
	Delete *kit.Stmt
	// Pruned records each range's end as its partition's pruned seq.
	Pruned *kit.Stmt
}

var vacuumSQL = vacuumStmts{
	// None while the rotator holds the prune (rotate.go): truncation will
	// remove the rows.
	Counters: kit.Inline(`SELECT v.partition_id, v.pruned_seq, p.processed_seq FROM {vacuum_counter} v
JOIN {processor} p ON p.partition_id = v.partition_id WHERE p.processed_seq > v.pruned_seq
AND NOT EXISTS (SELECT 1 FROM {generations} g WHERE g.prune_held_until > UTC_TIMESTAMP(6))`),
	// A multi-table DELETE: the portable DELETE … WHERE id IN (SELECT …)
	// scans the whole body table per chunk on MariaDB. STRAIGHT_JOIN reads
	// the ranges, then outgoing by primary key, then bodies by primary
	// key, so it never waits on the uncommitted body rows of open producers.
	// One generation, ?outgoing and ?body, per run.
	Delete: kit.Inline(`DELETE o, b
FROM JSON_TABLE(?ranges, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r
STRAIGHT_JOIN ?outgoing o ON o.partition_id = r.pid AND o.seq > r.lo AND o.seq <= r.hi
STRAIGHT_JOIN ?body b ON b.id = o.body_id`),
	// Monotonic: overlapping sweeps of two processes never move it back.
	Pruned: kit.Inline(`UPDATE JSON_TABLE(?ranges, '$[*]' COLUMNS (pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) r
STRAIGHT_JOIN {vacuum_counter} v ON v.partition_id = r.pid
SET v.pruned_seq = r.hi WHERE v.pruned_seq < r.hi`),
}

// VacuumCounterList lists partitions with processed rows to prune.
func (d *mysqlDialect) VacuumCounterList(ctx context.Context, _ *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error) {
	return kit.VacuumCounters(ctx, d.Runner, vacuumSQL.Counters)
}

// VacuumDelete deletes every range in one statement per generation and
// records them as pruned in a last one, in one transaction.
func (d *mysqlDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	ranges := kit.RangesJSON(p.Ranges)
	var n int64
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		n = 0
		for g := range kit.Generations {
			args := kit.GenTables(d.Tables(), g)
			args["ranges"] = ranges
			deleted, err := d.Affected(ctx, tx, vacuumSQL.Delete, args)
			if err != nil {
				return err
			}
			n += deleted
		}
		_, err := d.Exec(ctx, tx, vacuumSQL.Pruned, kit.Args{"ranges": ranges})
		return err
	})
	// Each message is one outgoing and one body row.
	return int(n / 2), err
}
