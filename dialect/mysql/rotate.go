package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// Tables rotated instead of pruned (docs/ROTATION.md, "MariaDB"). body and
// outgoing are three generations of separate tables, {body_g0..2} and
// {outgoing_g0..2} (migration 011), and every statement names the ones it
// reads: a read of outgoing is three, one per generation, each still a
// probe of that table's primary key. New messages go to the current
// generation; a message's outgoing row goes to its body's generation. A
// closed generation whose every message is acked is truncated whole,
// instead of deleted row by row and purged by InnoDB.
//
// Truncation never relies on writers having moved on, only on checks made
// while the rotator holds a table locked (LOCK TABLES … WRITE, waiting at
// most the lock timeout). Every transaction that touched the table (a
// producer's body INSERT, a move's outgoing INSERT, a purge's tombstone,
// and every reader in a transaction: they read all three generations)
// holds its metadata lock until it ends, so the rotator's lock waits for
// its commit or rollback; one that comes after waits for the rotator, then
// writes into the emptied table, where the pipeline finds its rows as it
// finds any other. TRUNCATE is DDL: it commits at once and cannot be
// rolled back, so it runs only once the check under the lock passed.
//
// The two tables are locked and truncated one after the other, never
// together: LOCK TABLES takes its metadata locks in the order of their
// names, body before outgoing, and a pipeline transaction that held an
// outgoing table while it waited for the body table the rotator held made
// a deadlock, whose victim is the pipeline's transaction (1213 in the
// processor; a transactional handler's work rolled back and redone). One
// table at a time, the rotator holds nothing while it waits.
//
// Body goes first, because WaitProcessed (MessagePendingList) reads a
// body without an outgoing row as a message not yet moved: an outgoing
// row must never be gone while its body is there. Outgoing first left
// exactly that, acked messages reported pending, for as long as a
// producer's open transaction held the body table (a conformance case
// waited out its five minutes so, under load).
//
//  1. body: under its lock, no message of the generation is unacked,
//     read on another connection in one statement, so one read view: no
//     live incoming row has its body there, and no outgoing row of the
//     generation is above its cursor. Nothing can be added: a producer
//     that wrote the table has committed (the lock waited for it), with
//     its incoming row, and the next waits.
//  2. outgoing: under its lock, no row of it is above its partition's
//     cursor (its tops read on the locked connection, the cursors after
//     the lock on another: cursors only rise, and no row can be added),
//     and the body table is still empty. A stale producer may have written
//     a body there since step 1; its outgoing row, once moved, must stay
//     beside it, so the table waits for the next round. One still
//     uncommitted is not seen, and needs no wait: its outgoing row can
//     only be written after the truncation, which holds the table.
//
// A rotator killed between the two leaves a generation whose bodies are
// gone and whose outgoing rows are all acked; the next round finishes.

// genTop is one partition's last seq in one generation.
type genTop struct {
	PartitionID int64 `bun:"partition_id"`
	Top         int64 `bun:"top"`
}

// partitionCursor is one partition's cursor.
type partitionCursor struct {
	PartitionID  int64 `bun:"partition_id"`
	ProcessedSeq int64 `bun:"processed_seq"`
}

// rotations is the rotator's statements. The generation's tables are
// ?body and ?outgoing, bun.Ident values ({body}_gN, {outgoing}_gN).
// State reads the bytes a generation's two tables take from InnoDB's
// statistics (they lag by up to a tenth of the rows changed, which is
// precision enough to decide a switch); see genSize for how.
type rotations struct {
	kit.RotateSQL
	// Turn takes the rotator's turn, named lock ?name, without waiting: 1
	// when taken; Release gives it back.
	Turn    *kit.Stmt
	Release *kit.Stmt
	// Lock takes ?table for writing, waiting at most ?timeout seconds
	// (fractional: max_statement_time interrupts the wait, where
	// lock_wait_timeout counts whole seconds).
	Lock *kit.Stmt
	// Tops reads, on the locked connection, ?outgoing's last seq of every
	// partition that has a row there: one index dive each. No alias: a
	// session under LOCK TABLES may name a table only as it locked it.
	Tops *kit.Stmt
	// Cursors reads every partition's cursor.
	Cursors *kit.Stmt
	// Pending reads whether generation ?gen (?outgoing its outgoing
	// table) holds a message not acked, by PendingCursors' probes, in one
	// statement.
	Pending *kit.Stmt
	// Occupied reads whether ?body holds a row.
	Occupied *kit.Stmt
	// Truncate empties ?table; Unlock releases the session's table locks.
	Truncate *kit.Stmt
	Unlock   *kit.Stmt
}

// pendingOutgoing and pendingIncoming are the two probes by which
// PendingCursors finds a message of generation ?gen not acked: for
// processor row pr, a row of ?outgoing above its cursor (its last row,
// read backwards: one dive); for partition row pa, a live incoming row
// whose body is in ?gen. The checks under the locks read the same things
// in the same ways (Tops and Cursors for outgoing, Pending for body).
const (
	pendingOutgoing = `(SELECT o.seq FROM ?outgoing o WHERE o.partition_id = pr.partition_id ORDER BY o.seq DESC LIMIT 1) > pr.processed_seq`
	pendingIncoming = `(SELECT i.id FROM {incoming} i FORCE INDEX ({incoming}_partition_id)
	WHERE i.partition_id = pa.id AND i.body_gen = ?gen ORDER BY i.id LIMIT 1) IS NOT NULL`
)

// genSize is the bytes of one table as InnoDB's statistics give them. The
// name is a constant equality: only then does MariaDB look the table up;
// a name computed per row, or an IN list, opens every table of the schema
// (EXPLAIN: "Open_full_table; Scanned 1 database"), and an application's
// schema may hold hundreds: with 400 tables, 2.8 ms per round against
// 0.29 ms (docs/ROTATION.md, "MariaDB").
func genSize(table string) string {
	return `(SELECT COALESCE(SUM(t.data_length + t.index_length), 0) FROM information_schema.tables t
		WHERE t.table_schema = DATABASE() AND t.table_name = '` + table + `')`
}

// genSizes is State's CASE arms: each generation's two tables.
func genSizes() string {
	var b strings.Builder
	for g := range kit.Generations {
		fmt.Fprintf(&b, "\n\t\tWHEN %d THEN %s\n\t\t\t+ %s", g, genSize(fmt.Sprintf("{body}_g%d", g)), genSize(fmt.Sprintf("{outgoing}_g%d", g)))
	}
	return b.String()
}

var rotateSQL = rotations{RotateSQL: kit.RotateSQL{
	Current: kit.Inline(`SELECT gen FROM {generations} WHERE state = 'current'`),
	State: kit.Inline(`SELECT g.gen, g.state,
	COALESCE(g.opened_at < TIMESTAMPADD(MICROSECOND, -?interval_us, UTC_TIMESTAMP(6)), 0) AS old,
	CASE g.gen` + genSizes() + ` END AS size
FROM {generations} g ORDER BY g.gen`),
	Empty: kit.Inline(`SELECT NOT EXISTS (SELECT 1 FROM ?body) AND NOT EXISTS (SELECT 1 FROM ?outgoing)`),
	PendingCursors: kit.Inline(`SELECT pr.partition_id, pr.processed_seq FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id
WHERE ` + pendingOutgoing + ` OR ` + pendingIncoming),
	MarkEmpty: kit.Inline(`UPDATE {generations} SET state = 'empty', truncated_at = UTC_TIMESTAMP(6) WHERE gen = ?gen AND state = 'closed'`),
	// The pair's two rows are joined in as f and t, each found by its
	// primary key (read before any row changes): both rows change or
	// neither (kit.RotateSQL.Switch), and prune_held_until is ?from's as
	// it was.
	Switch: kit.Inline(`UPDATE {generations} g
JOIN {generations} f ON f.gen = ?from AND f.state = 'current'
JOIN {generations} t ON t.gen = ?to AND t.state = 'empty'
SET g.state = CASE WHEN g.gen = ?to THEN 'current' ELSE 'closed' END,
	g.opened_at = CASE WHEN g.gen = ?to THEN UTC_TIMESTAMP(6) ELSE g.opened_at END,
	g.closed_at = CASE WHEN g.gen = ?from THEN UTC_TIMESTAMP(6) ELSE g.closed_at END,
	g.prune_held_until = CASE WHEN g.gen = ?to THEN f.prune_held_until END
WHERE g.gen IN (?from, ?to)`),
	Demote: kit.Inline(`UPDATE {generations} SET state = 'closed', closed_at = UTC_TIMESTAMP(6), prune_held_until = NULL
WHERE state = 'current' AND gen <> ?keep`),
	Hold: kit.Inline(`UPDATE {generations} SET prune_held_until = CASE WHEN CAST(?hold_us AS SIGNED) > 0
	THEN TIMESTAMPADD(MICROSECOND, ?hold_us, UTC_TIMESTAMP(6)) END
WHERE state = 'current'`),
	// The first row left above pruned_seq, in any generation: a probe in
	// each, read upwards from it.
	Pruned: kit.Inline(`UPDATE {vacuum_counter} v JOIN {processor} pr ON pr.partition_id = v.partition_id
SET v.pruned_seq = LEAST(pr.processed_seq,
	COALESCE((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq),
	COALESCE((SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq),
	COALESCE((SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq))
WHERE v.pruned_seq < pr.processed_seq`),
},
	Turn:    kit.Inline(`SELECT GET_LOCK(?name, 0)`),
	Release: kit.Inline(`SELECT RELEASE_LOCK(?name)`),
	Lock:    kit.Inline(`SET STATEMENT max_statement_time = ?timeout FOR LOCK TABLES ?table WRITE`),
	Tops:    kit.Inline(`SELECT partition_id, MAX(seq) AS top FROM ?outgoing GROUP BY partition_id`),
	Cursors: kit.Inline(`SELECT partition_id, processed_seq FROM {processor}`),
	Pending: kit.Inline(`SELECT EXISTS (SELECT 1 FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id
WHERE ` + pendingOutgoing + ` OR ` + pendingIncoming + `)`),
	Occupied: kit.Inline(`SELECT EXISTS (SELECT 1 FROM ?body)`),
	Truncate: kit.Inline(`TRUNCATE TABLE ?table`),
	Unlock:   kit.Inline(`UNLOCK TABLES`),
}

// rotation is the rotator of this dialect: the flow every rotating dialect
// shares (kit.Rotation), with MariaDB's turn and truncation.
func (d *mysqlDialect) rotation() *kit.Rotation {
	return &kit.Rotation{R: d.Runner, SQL: rotateSQL.RotateSQL, Gens: &d.gens, Stall: &d.stall,
		Turn: d.rotateTurn, Truncate: d.truncateGen}
}

// TableRotate runs one round of the rotation; see vacuum.Rotator. On
// MySQL, which is not supported (mysql.go) and has no SET STATEMENT to
// bound the lock's wait, it does nothing: every message stays in
// generation 0 and is pruned row by row, as with rotation off.
func (d *mysqlDialect) TableRotate(ctx context.Context, p *dialect.TableRotateParams) (dialect.TableRotateResult, error) {
	if !d.rotates {
		return dialect.TableRotateResult{}, nil
	}
	return d.rotation().Round(ctx, p)
}

// rotateTurn takes the rotator's turn: a named lock of conn's session.
func (d *mysqlDialect) rotateTurn(ctx context.Context, conn bun.Conn) (func(), bool, error) {
	lock := kit.Args{"name": d.Tables().Prefix + "rotate"}
	var got sql.NullInt64
	if err := d.Query(ctx, conn, rotateSQL.Turn, lock, &got); err != nil || got.Int64 != 1 {
		return nil, false, err
	}
	return func() { _, _ = d.Exec(context.WithoutCancel(ctx), conn, rotateSQL.Release, lock) }, true, nil
}

// errPending refuses a truncation whose checks under the lock found a
// message not acked.
var errPending = errors.New("seqbox: generation holds messages not acked")

// truncateGen empties closed generation g, which holds rows, if every
// message in it is acked, and marks it empty; it returns why not
// otherwise. The decisions are the checks made under the locks, one table
// at a time (see above): the one before them only spares locks that would
// be taken for nothing.
func (d *mysqlDialect) truncateGen(ctx context.Context, g int, lockTimeout time.Duration) (dialect.RotateReason, error) {
	t := d.Tables()
	outgoing, body := kit.GenTable(t.Outgoing, g), kit.GenTable(t.Body, g)
	check := kit.Args{"gen": g, "outgoing": outgoing}
	var pending []partitionCursor
	if err := d.Query(ctx, d.DB(), rotateSQL.PendingCursors, check, &pending); err != nil {
		return "", err
	}
	if len(pending) > 0 {
		return dialect.RotatePending, nil
	}
	reason, err := d.truncateLocked(ctx, "body", body, lockTimeout, func(bun.Conn) error {
		var pending bool
		if err := d.Query(ctx, d.DB(), rotateSQL.Pending, check, &pending); err != nil {
			return err
		}
		if pending {
			return errPending
		}
		return nil
	})
	if reason != "" || err != nil {
		return reason, err
	}
	if err := d.rotateHook(ctx, "between", bun.Conn{}); err != nil {
		return "", err
	}
	reason, err = d.truncateLocked(ctx, "outgoing", outgoing, lockTimeout, func(conn bun.Conn) error {
		return d.outgoingAcked(ctx, conn, outgoing, body)
	})
	if reason != "" || err != nil {
		return reason, err
	}
	_, err = d.Exec(ctx, d.DB(), rotateSQL.MarkEmpty, kit.Args{"gen": g})
	return "", err
}

// truncateLocked locks table on a connection of its own, runs check
// (errPending refuses), truncates the table and unlocks it.
func (d *mysqlDialect) truncateLocked(ctx context.Context, name string, table bun.Ident, lockTimeout time.Duration, check func(bun.Conn) error) (dialect.RotateReason, error) {
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		return "", d.Wrap(err)
	}
	defer conn.Close()
	timeout := max(lockTimeout.Seconds(), 0.001)
	if _, err := d.Exec(ctx, conn, rotateSQL.Lock, kit.Args{"timeout": timeout, "table": table}); err != nil {
		if lockTimedOut(err) {
			return dialect.RotateBusy, nil
		}
		return "", err
	}
	// The connection goes back to the pool only once its lock is gone.
	defer func() { _, _ = d.Exec(context.WithoutCancel(ctx), conn, rotateSQL.Unlock, nil) }()
	if err := d.rotateHook(ctx, "locked "+name, conn); err != nil {
		return "", err
	}
	if err := check(conn); err != nil {
		if errors.Is(err, errPending) {
			return dialect.RotatePending, nil
		}
		return "", err
	}
	if _, err := d.Exec(ctx, conn, rotateSQL.Truncate, kit.Args{"table": table}); err != nil {
		return "", err
	}
	return "", d.rotateHook(ctx, "truncated "+name, conn)
}

// outgoingAcked is the check under outgoing's lock: errPending when a row
// of it is above its partition's cursor, or when body, truncated just
// before, holds a row again (a stale producer's). Its tops are read on
// conn, which holds the table; the rest on another connection, after the
// lock.
func (d *mysqlDialect) outgoingAcked(ctx context.Context, conn bun.Conn, outgoing, body bun.Ident) error {
	var occupied bool
	if err := d.Query(ctx, d.DB(), rotateSQL.Occupied, kit.Args{"body": body}, &occupied); err != nil {
		return err
	}
	if occupied {
		return errPending
	}
	var tops []genTop
	if err := d.Query(ctx, conn, rotateSQL.Tops, kit.Args{"outgoing": outgoing}, &tops); err != nil {
		return err
	}
	if len(tops) == 0 {
		return nil
	}
	var cursors []partitionCursor
	if err := d.Query(ctx, d.DB(), rotateSQL.Cursors, nil, &cursors); err != nil {
		return err
	}
	acked := make(map[int64]int64, len(cursors))
	for _, c := range cursors {
		acked[c.PartitionID] = c.ProcessedSeq
	}
	for _, t := range tops {
		// A partition without a processor row cannot ack: its rows stay.
		if c, ok := acked[t.PartitionID]; !ok || t.Top > c {
			return errPending
		}
	}
	return nil
}

// lockTimedOut reports a LOCK TABLES that waited out its timeout: the
// statement interrupted by max_statement_time (1969), or a lock wait
// timeout (1205).
func lockTimedOut(err error) bool { return lockTimeoutRE.MatchString(err.Error()) }

var lockTimeoutRE = regexp.MustCompile(`Error (1969|1205)\b`)

// rotateHook runs the test hook at a stage of a truncation ("locked
// body", "locked outgoing": after a table's lock, before its check;
// "truncated body", "truncated outgoing": after its TRUNCATE; "between":
// with neither table locked, conn the zero Conn), so that a test can kill
// the connection there, or write between the two. nil outside tests.
func (d *mysqlDialect) rotateHook(ctx context.Context, stage string, conn bun.Conn) error {
	if d.onRotate == nil {
		return nil
	}
	return d.onRotate(ctx, stage, conn)
}
