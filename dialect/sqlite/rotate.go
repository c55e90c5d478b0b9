package sqlite

import (
	"context"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// Tables rotated instead of pruned (docs/ROTATION.md, "SQLite"). body and
// outgoing are three generations of separate tables, {body_g0..2} and
// {outgoing_g0..2} (migration 010), and every statement names the ones it
// reads: a read of outgoing is three, one per generation, each still a
// search of that table's primary key. New messages go to the current
// generation; a message's outgoing row goes to its body's generation. A
// closed generation whose every message is acked is emptied whole by a
// DELETE without WHERE, which SQLite runs as a truncation (no row
// visited), instead of row by row.
//
// SQLite has one writer, and seqbox one process per database (no
// dialect.MultiProcess): the rotator's turn is a mutex of the process.
// The truncation is one write transaction through the runner's writer
// (RunInTx): the check (no outgoing row of the generation above its
// partition's cursor, no incoming row whose body is in it), the two
// DELETEs and the generation marked empty. No writer can come between the
// check and the DELETEs: a producer's or a move's transaction that wrote
// the generation has committed before the rotator's began (it held the
// write lock), so the check sees its rows; one that comes after waits for
// the rotator's commit, then writes into the emptied table, where every
// read finds it. So there is no stale-writer race to guard against, and
// no lock to time out: the rotator waits for the write lock as every
// writer does, and a reader (WAL) never holds it up, nor sees a half-done
// truncation. TableRotateParams.LockTimeout is not used.

// rotations is the rotator's statements. The generation's tables are
// ?body and ?outgoing, bun.Ident values ({body}_gN, {outgoing}_gN).
// State estimates a generation's bytes without reading its rows (genSize).
type rotations struct {
	kit.RotateSQL
	// Pending reads whether generation ?gen (?outgoing its outgoing
	// table) holds a message not acked, by PendingCursors' probes, in one
	// statement.
	Pending *kit.Stmt
	// DeleteOutgoing and DeleteBody empty ?outgoing and ?body: without a
	// WHERE, SQLite frees the tables' pages without visiting a row (the
	// truncate optimization; the tables have no trigger).
	DeleteOutgoing *kit.Stmt
	DeleteBody     *kit.Stmt
}

// pendingOutgoing and pendingIncoming are the two probes by which
// PendingCursors finds a message of generation ?gen not acked, for
// processor row pr: a row of ?outgoing above its cursor (one search of
// the primary key from the cursor), or an incoming row of the partition
// whose body is in ?gen (its index, read in id order: the oldest rows,
// where a closed generation's are, come first). Pending reads the same.
const (
	pendingOutgoing = `(SELECT o.seq FROM ?outgoing o WHERE o.partition_id = pr.partition_id AND o.seq > pr.processed_seq LIMIT 1) IS NOT NULL`
	pendingIncoming = `(SELECT i.id FROM {incoming} i WHERE i.partition_id = pr.partition_id AND i.body_gen = ?gen ORDER BY i.id LIMIT 1) IS NOT NULL`
)

// genSize estimates the bytes generation g's tables take, without reading
// their rows: dbstat, which SQLite's build by modernc has and mattn's
// does not, visits every page (150–330 ms for a 256 MiB table on the
// development machine, twice a round). The estimate is the four b-trees'
// root pages (an empty generation takes them, so that any RotateSize is
// exceeded by a generation that exists), plus the rows written since the
// table was emptied (the span of body's rowids: two descents) times the
// bytes of a message: the content of the last 64 bodies, read by rowid
// backwards, a quarter more for the room left in pages, plus genRowBytes
// of keys and outgoing row. Calibrated against dbstat: within a quarter
// for payloads of 16 B to 6 KiB (TestRotateSizeEstimate). Rows pruned one by
// one count until the table is emptied (only while a pinned generation is
// pruned, when a switch is impossible anyway).
func genSize(g int) string {
	body := "{body_g" + strconv.Itoa(g) + "}"
	return `CAST((SELECT 4 * page_size FROM pragma_page_size())
	+ COALESCE(((SELECT MAX(rowid) FROM ` + body + `) - (SELECT MIN(rowid) FROM ` + body + `) + 1)
		* (SELECT AVG(length(id) + length(payload_type) + length(payload) + COALESCE(length(CAST(headers AS BLOB)), 0)
			+ COALESCE(length(msg_key), 0) + length(created_at)) * 1.25 + ` + strconv.Itoa(genRowBytes) + `
			FROM (SELECT id, payload_type, payload, headers, msg_key, created_at FROM ` + body + ` ORDER BY rowid DESC LIMIT 64)), 0) AS INTEGER)`
}

// genRowBytes is what a message takes besides its body's content: the
// records' headers, body's rowid and key index entry, the outgoing row and
// its body_id index entry.
const genRowBytes = 110

var rotateSQL = rotations{RotateSQL: kit.RotateSQL{
	Current: kit.Inline(`SELECT gen FROM {generations} WHERE state = 'current'`),
	State: kit.Inline(`SELECT g.gen, g.state,
	COALESCE(g.opened_at < strftime('%Y-%m-%d %H:%M:%f', 'now', (?interval_us / -1000000.0) || ' seconds'), 0) AS old,
	CASE g.gen WHEN 0 THEN ` + genSize(0) + `
	WHEN 1 THEN ` + genSize(1) + `
	WHEN 2 THEN ` + genSize(2) + ` END AS size
FROM {generations} g ORDER BY g.gen`),
	Empty: kit.Inline(`SELECT NOT EXISTS (SELECT 1 FROM ?body) AND NOT EXISTS (SELECT 1 FROM ?outgoing)`),
	PendingCursors: kit.Inline(`SELECT pr.partition_id, pr.processed_seq FROM {processor} pr
WHERE ` + pendingOutgoing + ` OR ` + pendingIncoming),
	MarkEmpty: kit.Inline(`UPDATE {generations} SET state = 'empty', truncated_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
WHERE gen = ?gen AND state = 'closed'`),
	// UPDATE … FROM: SQLite computes every new value from the rows as they
	// were before the statement, so prune_held_until is ?from's before its
	// row changes (a sub-select in SET would read the row already updated
	// when ?from comes first). The FROM is one row only when ?from is
	// current and ?to empty: both rows change or neither
	// (kit.RotateSQL.Switch).
	Switch: kit.Inline(`UPDATE {generations} SET state = CASE WHEN gen = ?to THEN 'current' ELSE 'closed' END,
	opened_at = CASE WHEN gen = ?to THEN strftime('%Y-%m-%d %H:%M:%f', 'now') ELSE opened_at END,
	closed_at = CASE WHEN gen = ?from THEN strftime('%Y-%m-%d %H:%M:%f', 'now') ELSE closed_at END,
	prune_held_until = CASE WHEN gen = ?to THEN p.held END
FROM (SELECT f.prune_held_until AS held FROM {generations} f JOIN {generations} t ON t.gen = ?to AND t.state = 'empty'
	WHERE f.gen = ?from AND f.state = 'current') p
WHERE gen IN (?from, ?to)`),
	Demote: kit.Inline(`UPDATE {generations} SET state = 'closed', closed_at = strftime('%Y-%m-%d %H:%M:%f', 'now'), prune_held_until = NULL
WHERE state = 'current' AND gen <> ?keep`),
	Hold: kit.Inline(`UPDATE {generations} SET prune_held_until = CASE WHEN CAST(?hold_us AS INTEGER) > 0
	THEN strftime('%Y-%m-%d %H:%M:%f', 'now', (?hold_us / 1000000.0) || ' seconds') END
WHERE state = 'current'`),
	// The first row left above pruned_seq, in any generation: a search of
	// each one's primary key upwards from it. Scalar MIN is NULL when any
	// argument is: each is COALESCEd.
	Pruned: kit.Inline(`UPDATE {vacuum_counter} AS v SET pruned_seq = MIN(pr.processed_seq,
	COALESCE((SELECT o.seq FROM {outgoing_g0} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq),
	COALESCE((SELECT o.seq FROM {outgoing_g1} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq),
	COALESCE((SELECT o.seq FROM {outgoing_g2} o WHERE o.partition_id = pr.partition_id AND o.seq > v.pruned_seq ORDER BY o.seq LIMIT 1) - 1, pr.processed_seq))
FROM {processor} pr
WHERE pr.partition_id = v.partition_id AND v.pruned_seq < pr.processed_seq`),
},
	Pending: kit.Inline(`SELECT EXISTS (SELECT 1 FROM {processor} pr
WHERE ` + pendingOutgoing + ` OR ` + pendingIncoming + `)`),
	DeleteOutgoing: kit.Inline(`DELETE FROM ?outgoing`),
	DeleteBody:     kit.Inline(`DELETE FROM ?body`),
}

// rotation is the rotator of this dialect: the flow every rotating dialect
// shares (kit.Rotation), with SQLite's turn and truncation.
func (d *sqliteDialect) rotation() *kit.Rotation {
	return &kit.Rotation{R: d.Runner, SQL: rotateSQL.RotateSQL, Gens: &d.gens, Stall: &d.stall,
		Turn: d.rotateTurn, Truncate: d.truncateGen}
}

// TableRotate runs one round of the rotation; see vacuum.Rotator.
func (d *sqliteDialect) TableRotate(ctx context.Context, p *dialect.TableRotateParams) (dialect.TableRotateResult, error) {
	return d.rotation().Round(ctx, p)
}

// rotateTurn takes the rotator's turn: one process per database, so a
// mutex of this one; a round already running keeps it.
func (d *sqliteDialect) rotateTurn(context.Context, bun.Conn) (func(), bool, error) {
	if !d.rotating.TryLock() {
		return nil, false, nil
	}
	return d.rotating.Unlock, true, nil
}

// truncateGen empties closed generation g, which holds rows, if every
// message in it is acked, and marks it empty; it returns why not
// otherwise. The decision is the check in the write transaction that
// empties it (see above); the one before it, on a reader, only spares the
// writer a transaction taken for nothing.
func (d *sqliteDialect) truncateGen(ctx context.Context, g int, _ time.Duration) (dialect.RotateReason, error) {
	tables := kit.GenTables(d.Tables(), g)
	check := kit.Args{"gen": g, "outgoing": tables["outgoing"]}
	var pending bool
	if err := d.Query(ctx, d.DB(), rotateSQL.Pending, check, &pending); err != nil {
		return "", err
	}
	if pending {
		return dialect.RotatePending, nil
	}
	var reason dialect.RotateReason
	err := d.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		reason = ""
		if err := d.Query(ctx, tx, rotateSQL.Pending, check, &pending); err != nil {
			return err
		}
		if pending {
			reason = dialect.RotatePending
			return nil
		}
		if _, err := d.Exec(ctx, tx, rotateSQL.DeleteOutgoing, kit.Args{"outgoing": tables["outgoing"]}); err != nil {
			return err
		}
		if _, err := d.Exec(ctx, tx, rotateSQL.DeleteBody, kit.Args{"body": tables["body"]}); err != nil {
			return err
		}
		_, err := d.Exec(ctx, tx, rotateSQL.MarkEmpty, kit.Args{"gen": g})
		return err
	})
	if err != nil {
		return "", err
	}
	return reason, nil
}
