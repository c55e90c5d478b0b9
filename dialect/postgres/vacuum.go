package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// vacuums is the vacuum's statements: the prune of processed messages
// and, with autovacuum off, the VACUUM of seqbox's tables.
type vacuums struct {
	// Counters reads the partitions whose cursor is past what has been
	// pruned (kit.VacuumCounters), none while the rotator holds the prune:
	// it keeps up, and truncating whole generations removes those rows
	// (rotate.go; docs/ARCHITECTURE.md, "Vacuum"). The hold lapses by
	// itself if the rotator stops, and ends when a generation is pinned.
	Counters *kit.Stmt
	// DeleteSettings plans the rest of Delete's transaction with nested
	// loops only and commits it as seqbox's setting says (docs/ARCHITECTURE.md,
	// "Asynchronous commits"): the planner otherwise joins the deleted ids
	// to body by hashing a sequential scan of the whole body table, backlog
	// and dead rows included (BENCHMARKS.md, "Figures behind design
	// choices", "PostgreSQL vacuum with nested loops only").
	// set_config(…, true) lasts until the transaction ends, and it runs
	// first because a statement is planned before any of it runs.
	DeleteSettings *kit.Stmt
	// Delete deletes the outgoing rows of every range and their bodies and
	// records each range as pruned (monotonic: overlapping sweeps of two
	// processes never move it back), in one statement. The ranges are three
	// parallel arrays (?pids ?froms ?tos, kit.PGArray): one value each,
	// whatever their count. Bodies go by id = ANY(ARRAY(…)), probes of
	// their primary key.
	Delete *kit.Stmt

	// Autovacuum reads the server's autovacuum setting.
	Autovacuum *kit.Stmt
	// TryLock and Unlock are the session advisory lock ?name that gives
	// one process at a time the turn to vacuum the tables.
	TryLock *kit.Stmt
	Unlock  *kit.Stmt
	// Table vacuums the table ?table (a bun.Ident). VACUUM cannot run in a
	// transaction: it autocommits on the pinned connection. SKIP_LOCKED
	// passes over a table another VACUUM holds. One table per statement
	// keeps each under a driver's read timeout (pgdriver's is 10 s by
	// default) on a busy server.
	Table *kit.Stmt
}

var vacuumSQL = vacuums{
	Counters: kit.Inline(`SELECT v.partition_id, v.pruned_seq, p.processed_seq FROM {vacuum_counter} v
CROSS JOIN ` + currentRow("v.partition_id", "p") + ` WHERE p.processed_seq > v.pruned_seq
	AND NOT EXISTS (SELECT 1 FROM {generations} g WHERE g.prune_held_until > now())`),
	DeleteSettings: kit.Inline(`SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('synchronous_commit', COALESCE(CAST(?sync_commit AS text), current_setting('synchronous_commit')), true)`),
	Delete: kit.Inline(`WITH r AS (SELECT * FROM unnest(CAST(?pids AS bigint[]), CAST(?froms AS bigint[]), CAST(?tos AS bigint[])) AS r(pid, lo, hi)),
d AS (DELETE FROM {outgoing} o USING r WHERE o.partition_id = r.pid AND o.seq > r.lo AND o.seq <= r.hi RETURNING o.body_id),
b AS (DELETE FROM {body} WHERE id = ANY(ARRAY(SELECT body_id FROM d)) RETURNING 1),
v AS (UPDATE {vacuum_counter} v SET pruned_seq = r.hi FROM r WHERE v.partition_id = r.pid AND v.pruned_seq < r.hi RETURNING 1)
SELECT (SELECT count(*) FROM d) AS deleted, (SELECT count(*) FROM b) + (SELECT count(*) FROM v) AS others`),

	Autovacuum: kit.Inline(`SELECT current_setting('autovacuum')`),
	TryLock:    kit.Inline(`SELECT pg_try_advisory_lock(hashtext(?name))`),
	Unlock:     kit.Inline(`SELECT pg_advisory_unlock(hashtext(?name))`),
	Table:      kit.Inline(`VACUUM (SKIP_LOCKED) ?table`),
}

// VacuumCounterList lists partitions with processed rows to prune.
func (d *pgDialect) VacuumCounterList(ctx context.Context, _ *dialect.VacuumCounterListParams) ([]dialect.VacuumCounter, error) {
	return kit.VacuumCounters(ctx, d.Runner, vacuumSQL.Counters)
}

// VacuumDelete deletes every range in one statement, planned with nested
// loops only, in a transaction that commits as seqbox's setting says
// (asynchronously by default).
func (d *pgDialect) VacuumDelete(ctx context.Context, p *dialect.VacuumDeleteParams) (int, error) {
	pids, froms, tos := make([]int64, len(p.Ranges)), make([]int64, len(p.Ranges)), make([]int64, len(p.Ranges))
	for i, r := range p.Ranges {
		pids[i], froms[i], tos[i] = r.PartitionID, r.FromSeq, r.ToSeq
	}
	args := kit.Args{"pids": kit.PGArray(pids), "froms": kit.PGArray(froms), "tos": kit.PGArray(tos)}
	var deleted, others int64
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Exec(ctx, tx, vacuumSQL.DeleteSettings, nil); err != nil {
			return err
		}
		return d.Query(ctx, tx, vacuumSQL.Delete, args, &deleted, &others)
	})
	return int(deleted), err
}

// TableVacuum vacuums seqbox's tables when autovacuum is off: without it
// the rows vacuum and the sequencer delete are never reclaimed, so the
// files grow with total traffic and the indexes with them (guarantee 7
// holds for rows, not for disk). With autovacuum on it does nothing: the
// server's own vacuum (with these tables' vacuum_truncate off) is better
// placed. One process at a time takes the turn, by a session advisory lock.
// See vacuum.TableVacuumer.
func (d *pgDialect) TableVacuum(ctx context.Context, _ *dialect.TableVacuumParams) (dialect.TableVacuumResult, error) {
	var autovacuum string
	if err := d.Query(ctx, d.DB(), vacuumSQL.Autovacuum, nil, &autovacuum); err != nil {
		return dialect.TableVacuumResult{}, err
	}
	if autovacuum == "on" {
		return dialect.TableVacuumResult{Reason: "autovacuum is on"}, nil
	}
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		return dialect.TableVacuumResult{}, d.Wrap(err)
	}
	defer conn.Close()
	lock := kit.Args{"name": d.Tables().Prefix + "table_vacuum"}
	var got bool
	if err := d.Query(ctx, conn, vacuumSQL.TryLock, lock, &got); err != nil {
		return dialect.TableVacuumResult{}, err
	}
	if !got {
		return dialect.TableVacuumResult{Reason: "another process is vacuuming"}, nil
	}
	defer func() {
		_, _ = d.Exec(context.WithoutCancel(ctx), conn, vacuumSQL.Unlock, lock)
	}()
	t := d.Tables()
	// body and outgoing are partitioned: VACUUM of each parent vacuums its
	// generations.
	for _, table := range []string{t.Incoming, t.Outgoing, t.Body, t.Partitions, boundTable(t), t.Processor, t.VacuumCounter, t.DedupKeys, t.Generations} {
		if _, err := d.Exec(ctx, conn, vacuumSQL.Table, kit.Args{"table": bun.Ident(table)}); err != nil {
			return dialect.TableVacuumResult{}, err
		}
	}
	return dialect.TableVacuumResult{Vacuumed: true}, nil
}
