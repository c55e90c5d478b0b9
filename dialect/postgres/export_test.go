package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// RenderMoveReads renders the moves' reads of incoming, Select for
// partition pids[0] and ManySelect for every pid, from bound 0, for the
// external plan test.
func RenderMoveReads(d dialect.Dialect, db *bun.DB, pids []int64, limit int) (map[string]string, error) {
	pg := d.(*pgDialect)
	sel, err := pg.Runner.Render(db.QueryGen(), moveSQL.Select, kit.Args{"pid": pids[0], "limit": limit})
	if err != nil {
		return nil, err
	}
	many, err := pg.Runner.Render(db.QueryGen(), moveSQL.ManySelect, kit.Args{"pids": kit.PGArray(pids), "limit": limit})
	if err != nil {
		return nil, err
	}
	return map[string]string{"Select": sel, "ManySelect": many}, nil
}

// OnRotate sets d's hook into a truncation's transaction (rotateHook).
func OnRotate(d dialect.Dialect, hook func(ctx context.Context, stage string, tx bun.Tx) error) {
	d.(*pgDialect).onRotate = hook
}

// MigrateTo applies the bootstrap and the first version migrations, as a
// release that had only those did, and records them.
func MigrateTo(ctx context.Context, db *bun.DB, prefix string, version int) error {
	s, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return err
	}
	s.Migrations = s.Migrations[:version]
	stmts, err := s.Render(prefix)
	if err != nil {
		return err
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for v := 1; v <= version; v++ {
		if _, err := db.ExecContext(ctx, "INSERT INTO ? (version) VALUES (?)", bun.Ident(prefix+"schema_version"), v); err != nil {
			return err
		}
	}
	return nil
}

// Migration returns migration version's statements for prefix.
func Migration(prefix string, version int) ([]string, error) {
	s, err := kit.LoadSchema(migrationFS)
	if err != nil {
		return nil, err
	}
	s.Bootstrap = "SELECT 1"
	s.Migrations = s.Migrations[version-1 : version]
	stmts, err := s.Render(prefix)
	if err != nil {
		return nil, err
	}
	return stmts[1:], nil
}

// RenderBatchRead renders the batch read (OutgoingList) of partition pid
// after seq after, for the external plan test.
func RenderBatchRead(d dialect.Dialect, db *bun.DB, pid, after int64, limit int) (string, error) {
	return d.(*pgDialect).Runner.Render(db.QueryGen(), processorSQL.OutgoingList, kit.Args{"pid": pid, "after": after, "limit": limit})
}

// RenderIncomingPartitions renders the reconciler's list of partitions with
// rows to move, for the external plan test.
func RenderIncomingPartitions(d dialect.Dialect, db *bun.DB) (string, error) {
	return d.(*pgDialect).Runner.Render(db.QueryGen(), moveSQL.IncomingPartitions, nil)
}

// RenderRotatePending renders the rotator's check of generation gen from
// xid since, for the external plan test.
func RenderRotatePending(d dialect.Dialect, db *bun.DB, gen int, since int64) (string, error) {
	pg := d.(*pgDialect)
	return pg.Runner.Render(db.QueryGen(), rotateSQL.Pending, kit.Args{"gen": gen, "outgoing": pg.genTables(gen)["outgoing"], "since": since})
}

// RenderRotatePendingCursors renders the rotator's list of generation
// gen's pending partitions, for the external plan test.
func RenderRotatePendingCursors(d dialect.Dialect, db *bun.DB, gen int) (string, error) {
	pg := d.(*pgDialect)
	return pg.Runner.Render(db.QueryGen(), rotateSQL.PendingCursors, kit.Args{"gen": gen, "outgoing": pg.genTables(gen)["outgoing"], "since": int64(0)})
}

// PreparedStatements are d's prepared statements as sent to the server, by
// name, for the plan tests.
func PreparedStatements(d dialect.Dialect) map[string]string {
	out := map[string]string{}
	for _, c := range d.(*pgDialect).Statements() {
		if c.PreparedText != "" {
			out[c.Name] = c.PreparedText
		}
	}
	return out
}

// MoveLock runs the several-partition move's lock of pids on conn, in a
// transaction the caller began there, and returns how many it locked.
func MoveLock(ctx context.Context, d dialect.Dialect, conn bun.Conn, pids []int64) (int, error) {
	var locks []struct {
		ID    int64 `bun:"id"`
		Bound int64 `bun:"bound"`
		XMin  int64 `bun:"xmin"`
	}
	err := d.(*pgDialect).Query(ctx, conn, moveSQL.ManyLock, kit.Args{"pids": kit.PGArray(pids)}, &locks)
	return len(locks), err
}

// SwitchGenerations runs d's RotateSQL.Switch from generation from to to.
func SwitchGenerations(ctx context.Context, d dialect.Dialect, from, to int) (sql.Result, error) {
	pg := d.(*pgDialect)
	return pg.Exec(ctx, pg.DB(), rotateSQL.Switch, kit.Args{"from": from, "to": to})
}

// RenderProcessorStatements renders, for partition pid, the statements
// that find its processor row on every lease, ack and move, for the
// external plan test.
func RenderProcessorStatements(d dialect.Dialect, db *bun.DB, pid int64) (map[string]string, error) {
	pg := d.(*pgDialect)
	lease := kit.Args{"owner": "o", "lease_us": int64(60_000_000), "pid": pid, "limit": 1}
	record := kit.Args{"pid": pid, "seq": int64(0), "attempts": 1, "last_error": "again", "retry_us": int64(0), "park": 0}
	guarded := kit.Args{"owner": "o"}
	for k, v := range record {
		guarded[k] = v
	}
	out := map[string]string{}
	for name, s := range map[string]struct {
		stmt *kit.Stmt
		args kit.Args
	}{
		"lease":         {leaseSQL.Batch, lease},
		"lease alone":   {leaseSQL.Returning, lease},
		"ack":           {leaseSQL.Ack, guarded},
		"ack and lease": {leaseSQL.AckLease, kit.Args{"owner": "o", "lease_us": int64(60_000_000), "pid": pid, "limit": 1, "seq": int64(0)}},
		"lock":          {processorSQL.Lock, kit.Args{"pid": pid}},
		"update":        {processorSQL.Update, record},
		"ready":         {processorSQL.ReadyList, kit.Args{"pids": kit.IDs([]int64{pid})}},
		"group lock":    {groupSQL.LockLeasable, kit.Args{"pids": groupSQL.LockArg([]int64{pid})}},
		"group owned":   {groupSQL.LockOwned, kit.Args{"pids": groupSQL.LockArg([]int64{pid}), "owner": "o"}},
	} {
		q, err := pg.Runner.Render(db.QueryGen(), s.stmt, s.args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = q
	}
	moves, err := RenderMoveReads(d, db, []int64{pid}, 10)
	if err != nil {
		return nil, err
	}
	for name, q := range moves {
		out["move: "+name] = q
	}
	return out, nil
}
