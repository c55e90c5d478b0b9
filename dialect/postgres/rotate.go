package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// Tables rotated instead of pruned (docs/ROTATION.md). body and outgoing
// are LIST-partitioned by gen into three generations, {body}_g0..2 and
// {outgoing}_g0..2 (migration 011). New messages go to the current
// generation; a message's outgoing row goes to its body's generation. A
// closed generation whose every message is acked is truncated whole,
// instead of deleted row by row and vacuumed.
//
// Truncation never relies on writers having moved on, only on checks made
// under a lock (docs/ARCHITECTURE.md, "Tables and locks"): in one
// transaction the rotator takes ACCESS EXCLUSIVE locks on the
// generation's two tables, waiting at most the lock timeout; then checks
// that no live incoming row has its body there and that none of its
// outgoing rows is above its partition's cursor; then truncates. A writer
// in flight holds a lock on the partition it wrote, so the rotator's lock
// waits for its commit or rollback, and the checks, run after the lock,
// see what it committed. A writer that comes after the lock writes into
// the emptied table, where the pipeline finds its rows as it finds any
// other: every read goes through the parent, all three generations.

// rotations is the rotator's statements. The generation's tables are
// ?body and ?outgoing, bun.Ident values ({body}_gN, {outgoing}_gN).
// State reads the bytes a generation's two partitions take from their file
// sizes (indexes and TOAST included: exact, and costs no scan), and their
// pages (floorPages).
type rotations struct {
	kit.RotateSQL
	// Pending reads whether generation ?gen holds a message not acked,
	// and its snapshot's xmin: an outgoing row above its partition's
	// cursor (one probe per partition, first: it is what usually
	// answers), or a live incoming row whose body is there, read as the
	// move reads (by each partition's index from its lower bound: the
	// backlog, never the dead rows below the bound), from xid ?since on.
	// Run once without a lock from 0, so that a generation still in use
	// is not locked for nothing, then under the lock, where it decides,
	// from the first run's xmin: a row committed since the first run's
	// snapshot has an xid at or above its xmin, and every older live row
	// the first run saw. So the check under the lock, while the pipeline
	// waits, reads the probes and only the newest incoming rows, not the
	// whole backlog again. Each partition's probe is in its index's
	// order, so that no plan can read a table instead: an EXISTS of
	// incoming became a scan of all of it, dead rows included, and the
	// outgoing probe's bare LIMIT a scan of the whole generation per
	// partition (the planner expects to find a row early; an acked
	// generation has none): 0.5–2.5 s per check in an autovacuum-on soak,
	// half of them under the lock, while the pipeline waited.
	Pending *kit.Stmt
	// LockTimeout sets the lock timeout ?timeout (text, "100ms") for the
	// rest of the transaction.
	LockTimeout *kit.Stmt
	// Lock and Truncate lock and empty ?outgoing and ?body. outgoing first:
	// the pipeline's transactions take them in that order (a
	// transactional handler's probes outgoing, then reads its batch with
	// the bodies), and the other order deadlocked with them until the lock
	// timeout, refusing most truncations under traffic.
	Lock     *kit.Stmt
	Truncate *kit.Stmt
	// FloorBody and FloorOutgoing write ?rows rows of nearly a quarter of
	// a page each into generation ?gen's ?body and ?outgoing, and
	// FloorDelete deletes them again in the same transaction, leaving
	// their pages behind (see floorPages). The rows are ?marker followed
	// by a number: a body id or a body_id longer than any message's, and
	// outgoing rows of partition -1, which no queue has.
	FloorBody     *kit.Stmt
	FloorOutgoing *kit.Stmt
	FloorDelete   *kit.Stmt
	// ProcessorPages reads {processor}'s pages. ProcessorFloor writes
	// ?rows rows of nearly half a page into it, and ProcessorFloorDelete
	// deletes them again in the same transaction, leaving their pages
	// (see processorFloor). They are rows of partitions -1 to -?rows,
	// which no queue has. AnalyzeProcessor takes its statistics.
	ProcessorPages       *kit.Stmt
	ProcessorFloor       *kit.Stmt
	ProcessorFloorDelete *kit.Stmt
	AnalyzeProcessor     *kit.Stmt
	// Analyze takes ?body and ?outgoing's statistics, which also makes
	// every cached plan that reads them be planned again.
	Analyze *kit.Stmt
}

// pendingOutgoing and pendingIncoming are the two probes by which Pending
// and PendingCursors (from ?since 0) find a message of generation ?gen not acked: for
// processor row pr, an outgoing row above its cursor; for partition row
// pa, a live incoming row whose body is in ?gen, from xid ?since on. One
// text, so that the list of pending partitions can never disagree with
// the check that refuses the truncation.
const (
	pendingOutgoing = `(SELECT o.seq FROM ?outgoing o WHERE o.partition_id = pr.partition_id AND o.seq > pr.processed_seq ORDER BY o.seq LIMIT 1) IS NOT NULL`
	pendingIncoming = `(SELECT i.id FROM {incoming} i WHERE i.partition_id = pa.id AND i.xid >= ` + partitionBound + `
	AND i.xid >= CAST(CAST(?since AS text) AS xid8) AND i.body_gen = ?gen ORDER BY i.xid, i.id LIMIT 1) IS NOT NULL`
)

var rotateSQL = rotations{RotateSQL: kit.RotateSQL{
	Current: kit.Inline(`SELECT gen FROM {generations} WHERE state = 'current'`),
	State: kit.Inline(`SELECT g.gen, g.state,
	COALESCE(g.opened_at < now() - CAST(?interval_us AS double precision) * interval '1 microsecond', false) AS old,
	pg_total_relation_size(to_regclass('{body}_g' || g.gen)) + pg_total_relation_size(to_regclass('{outgoing}_g' || g.gen)) AS size,
	pg_relation_size(to_regclass('{body}_g' || g.gen)) / current_setting('block_size')::bigint AS body_pages,
	pg_relation_size(to_regclass('{outgoing}_g' || g.gen)) / current_setting('block_size')::bigint AS outgoing_pages
FROM {generations} g ORDER BY g.gen`),
	Empty: kit.Inline(`SELECT NOT EXISTS (SELECT 1 FROM ?body) AND NOT EXISTS (SELECT 1 FROM ?outgoing)`),
	PendingCursors: kit.Inline(`SELECT pr.partition_id, pr.processed_seq FROM {partitions} pa CROSS JOIN ` + currentRow("pa.id", "pr") + `
WHERE ` + pendingOutgoing + ` OR ` + pendingIncoming),
	MarkEmpty: kit.Inline(`UPDATE {generations} SET state = 'empty', truncated_at = now() WHERE gen = ?gen AND state = 'closed'`),
	// The pair is locked and checked before either row changes: both
	// rows change or neither (kit.RotateSQL.Switch).
	Switch: kit.Inline(`WITH pair AS (SELECT gen, prune_held_until FROM {generations}
	WHERE (gen = ?from AND state = 'current') OR (gen = ?to AND state = 'empty') FOR UPDATE)
UPDATE {generations} g SET state = CASE WHEN g.gen = ?to THEN 'current' ELSE 'closed' END,
	opened_at = CASE WHEN g.gen = ?to THEN now() ELSE g.opened_at END,
	closed_at = CASE WHEN g.gen = ?from THEN now() ELSE g.closed_at END,
	prune_held_until = CASE WHEN g.gen = ?to THEN (SELECT prune_held_until FROM pair WHERE gen = ?from) END
FROM pair p WHERE g.gen = p.gen AND (SELECT COUNT(*) FROM pair) = 2`),
	Demote: kit.Inline(`UPDATE {generations} SET state = 'closed', closed_at = now(), prune_held_until = NULL
WHERE state = 'current' AND gen <> ?keep`),
	Hold: kit.Inline(`UPDATE {generations} SET prune_held_until = CASE WHEN CAST(?hold_us AS bigint) > 0
	THEN now() + CAST(?hold_us AS double precision) * interval '1 microsecond' END
WHERE state = 'current'`),
	Pruned: kit.Inline(`UPDATE {vacuum_counter} v SET pruned_seq = n.seq
FROM (SELECT pr.partition_id, LEAST(pr.processed_seq, COALESCE((SELECT o.seq FROM {outgoing} o
		WHERE o.partition_id = pr.partition_id AND o.seq > vc.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq)) AS seq
	FROM {vacuum_counter} vc CROSS JOIN ` + currentRow("vc.partition_id", "pr") + `) n
WHERE v.partition_id = n.partition_id AND v.pruned_seq < n.seq`),
},
	Pending: kit.Inline(`SELECT EXISTS (SELECT 1 FROM {partitions} pa CROSS JOIN ` + currentRow("pa.id", "pr") + ` WHERE ` + pendingOutgoing + `)
	OR EXISTS (SELECT 1 FROM {partitions} pa WHERE ` + pendingIncoming + `) AS pending,
	(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint AS xmin`),
	LockTimeout: kit.Inline(`SELECT set_config('lock_timeout', ?timeout, true)`),
	Lock:        kit.Inline(`LOCK TABLE ?outgoing, ?body IN ACCESS EXCLUSIVE MODE`),
	Truncate:    kit.Inline(`TRUNCATE ?outgoing, ?body`),
	FloorBody: kit.Inline(`INSERT INTO ?body (id, payload_type, payload, gen)
SELECT convert_to(?marker, 'UTF8') || int4send(i), ?marker, convert_to(repeat('x', 1900), 'UTF8'), CAST(?gen AS smallint)
FROM generate_series(1, CAST(?rows AS integer)) i`),
	FloorOutgoing: kit.Inline(`INSERT INTO ?outgoing (partition_id, seq, body_id, gen)
SELECT -1, i, convert_to(?marker || repeat('x', 1900), 'UTF8') || int4send(i), CAST(?gen AS smallint)
FROM generate_series(1, CAST(?rows AS integer)) i`),
	FloorDelete: kit.Inline(`WITH b AS (DELETE FROM ?body WHERE id IN (SELECT convert_to(?marker, 'UTF8') || int4send(i)
	FROM generate_series(1, CAST(?rows AS integer)) i))
DELETE FROM ?outgoing WHERE partition_id = -1`),
	Analyze:        kit.Inline(`ANALYZE ?body, ?outgoing`),
	ProcessorPages: kit.Inline(`SELECT pg_relation_size(to_regclass('{processor}')) / current_setting('block_size')::bigint`),
	ProcessorFloor: kit.Inline(`INSERT INTO {processor} (partition_id, version, last_error)
SELECT -i, 0, repeat('x', 1900) FROM generate_series(1, CAST(?rows AS integer)) i`),
	ProcessorFloorDelete: kit.Inline(`DELETE FROM {processor} WHERE partition_id < 0`),
	AnalyzeProcessor:     kit.Inline(`ANALYZE {processor}`),
}

// floorPages is the size below which no generation's table is left, so
// that a sequential scan of it never costs the planner less than a probe
// of its primary key (about 8 in PostgreSQL's default costs; a scan costs
// at least 1 per page, whatever the statistics say of its rows). A
// generation emptied by TRUNCATE has no pages at all; once VACUUM or
// ANALYZE has recorded it so, every generic plan made meanwhile scanned
// it sequentially, and kept doing so while it refilled, until something
// invalidated the plan: 85 s for one grouped batch read in a soak
// (docs/ROTATION.md, "Statistics of an emptied generation"). The floor
// costs 512 KiB of empty pages per table, written once per truncation;
// vacuum_truncate = off keeps VACUUM from giving them back.
const floorPages = 64

// floorRows fills floorPages pages: rows of nearly a quarter of a page,
// four to a page, small enough to be stored in the page uncompressed.
const floorRows = 4 * floorPages

// floorMarker begins every floor row's id (body) and body_id (outgoing).
const floorMarker = "seqbox-floor-"

// genTables are generation gen's two tables.
func (d *pgDialect) genTables(gen int) kit.Args { return kit.GenTables(d.Tables(), gen) }

// errPending rolls back a truncation whose checks under the lock found a
// message not acked.
var errPending = errors.New("seqbox: generation holds messages not acked")

// rotateHook runs the test hook at a stage of a truncation's transaction
// ("locked": after the lock, before the checks; "truncated": before the
// commit), so that a test can kill the connection there. nil outside tests.
func (d *pgDialect) rotateHook(ctx context.Context, stage string, tx bun.Tx) error {
	if d.onRotate == nil {
		return nil
	}
	return d.onRotate(ctx, stage, tx)
}

// rotation is the rotator of this dialect: the flow every rotating dialect
// shares (kit.Rotation), with PostgreSQL's turn, truncation and floor.
func (d *pgDialect) rotation() *kit.Rotation {
	return &kit.Rotation{R: d.Runner, SQL: rotateSQL.RotateSQL, Gens: &d.gens, Stall: &d.stall,
		Turn: d.rotateTurn, Truncate: d.truncateGen, Maintain: d.restoreFloors, CursorArgs: kit.Args{"since": int64(0)}}
}

// TableRotate runs one round of the rotation; see vacuum.Rotator.
func (d *pgDialect) TableRotate(ctx context.Context, p *dialect.TableRotateParams) (dialect.TableRotateResult, error) {
	return d.rotation().Round(ctx, p)
}

// rotateTurn takes the rotator's turn: the advisory lock TableVacuum
// takes, so that a table VACUUM and a truncation never queue behind each
// other.
func (d *pgDialect) rotateTurn(ctx context.Context, conn bun.Conn) (func(), bool, error) {
	lock := kit.Args{"name": d.Tables().Prefix + "table_vacuum"}
	var got bool
	if err := d.Query(ctx, conn, vacuumSQL.TryLock, lock, &got); err != nil || !got {
		return nil, false, err
	}
	return func() { _, _ = d.Exec(context.WithoutCancel(ctx), conn, vacuumSQL.Unlock, lock) }, true, nil
}

// truncateGen empties closed generation g, which holds rows, if every
// message in it is acked, and marks it empty; it returns why not
// otherwise. The decision is the check made under the lock: the one before
// it only spares a lock that would be taken for nothing.
func (d *pgDialect) truncateGen(ctx context.Context, g int, lockTimeout time.Duration) (dialect.RotateReason, error) {
	tables := d.genTables(g)
	check := kit.Args{"gen": g, "outgoing": tables["outgoing"], "since": int64(0)}
	var pending bool
	var xmin int64
	if err := d.Query(ctx, d.DB(), rotateSQL.Pending, check, &pending, &xmin); err != nil {
		return "", err
	}
	if pending {
		return dialect.RotatePending, nil
	}
	check["since"] = xmin
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Exec(ctx, tx, rotateSQL.LockTimeout, kit.Args{"timeout": strconv.FormatInt(max(lockTimeout.Milliseconds(), 1), 10) + "ms"}); err != nil {
			return err
		}
		if _, err := d.Exec(ctx, tx, rotateSQL.Lock, tables); err != nil {
			return err
		}
		if err := d.rotateHook(ctx, "locked", tx); err != nil {
			return err
		}
		var pending bool
		var xmin int64
		if err := d.Query(ctx, tx, rotateSQL.Pending, check, &pending, &xmin); err != nil {
			return err
		}
		if pending {
			return errPending
		}
		if _, err := d.Exec(ctx, tx, rotateSQL.Truncate, tables); err != nil {
			return err
		}
		if err := d.floor(ctx, tx, g); err != nil {
			return err
		}
		if _, err := d.Exec(ctx, tx, rotateSQL.MarkEmpty, kit.Args{"gen": g}); err != nil {
			return err
		}
		return d.rotateHook(ctx, "truncated", tx)
	})
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, errPending):
		return dialect.RotatePending, nil
	case sqlState(err) == "55P03":
		return dialect.RotateBusy, nil
	}
	return "", err
}

// floor writes generation g's floor (floorPages) in tx: rows written and
// deleted again, whose pages stay.
func (d *pgDialect) floor(ctx context.Context, tx bun.Tx, g int) error {
	t := d.genTables(g)
	for _, s := range []struct {
		stmt *kit.Stmt
		args kit.Args
	}{
		{rotateSQL.FloorBody, kit.Args{"body": t["body"], "gen": g, "rows": floorRows, "marker": floorMarker}},
		{rotateSQL.FloorOutgoing, kit.Args{"outgoing": t["outgoing"], "gen": g, "rows": floorRows, "marker": floorMarker}},
		{rotateSQL.FloorDelete, kit.Args{"body": t["body"], "outgoing": t["outgoing"], "rows": floorRows, "marker": floorMarker}},
	} {
		if _, err := d.Exec(ctx, tx, s.stmt, s.args); err != nil {
			return err
		}
	}
	return nil
}

// processorFloor writes the processor table's floor of floorPages pages
// if it is smaller than half of that, for the reason the generations have
// theirs: with statistics of a table of one page (16 rows, after any
// VACUUM or ANALYZE) every statement that reads it by partition was
// planned as a sequential scan, of every row version a held snapshot
// keeps; the probes of the current version (processor.go) need the
// planner to prefer the primary key. The table's fillfactor is 50, so
// a row of nearly half a page fills an insert's share of one: two rows a
// page. vacuum_truncate = off (migration 004) keeps the pages.
func (d *pgDialect) processorFloor(ctx context.Context) error {
	var pages int64
	if err := d.Query(ctx, d.DB(), rotateSQL.ProcessorPages, nil, &pages); err != nil {
		return err
	}
	if pages >= floorPages/2 {
		return nil
	}
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := d.Exec(ctx, tx, rotateSQL.ProcessorFloor, kit.Args{"rows": 2 * floorPages}); err != nil {
			return err
		}
		_, err := d.Exec(ctx, tx, rotateSQL.ProcessorFloorDelete, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("seqbox: floor of the processor table: %w", err)
	}
	if _, err := d.Exec(ctx, d.DB(), rotateSQL.AnalyzeProcessor, nil); err != nil {
		return fmt.Errorf("seqbox: analyze the processor table: %w", err)
	}
	return nil
}

// restoreFloors writes the floor of every generation, in rows, whose
// tables are smaller than half of floorPages: new ones (migration 011
// creates them empty), and any an operator rewrote (VACUUM FULL, CLUSTER)
// while it held few rows. Half, because rows may pack a little differently
// elsewhere, and the probe wins from 12 pages already. Then it analyzes
// them, so that plans made while they looked empty are made again.
// Truncation writes its own floor; this only restores one.
// First it restores the processor table's (processorFloor).
func (d *pgDialect) restoreFloors(ctx context.Context, rows []kit.GenRow) error {
	if err := d.processorFloor(ctx); err != nil {
		return err
	}
	for _, r := range rows {
		if r.BodyPages >= floorPages/2 && r.OutgoingPages >= floorPages/2 {
			continue
		}
		if err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error { return d.floor(ctx, tx, r.Gen) }); err != nil {
			return fmt.Errorf("seqbox: floor of generation %d: %w", r.Gen, err)
		}
		if _, err := d.Exec(ctx, d.DB(), rotateSQL.Analyze, d.genTables(r.Gen)); err != nil {
			return fmt.Errorf("seqbox: analyze generation %d: %w", r.Gen, err)
		}
	}
	return nil
}
