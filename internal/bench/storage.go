package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// readStorage is what the database says about the tables of d: sizes,
// dead rows, purge backlog, WAL. Each database keeps its garbage somewhere
// else, and that is where a held snapshot or a missing vacuum shows.
func readStorage(ctx context.Context, d dialect.Dialect) (Storage, error) {
	switch d.Name() {
	case dialect.Postgres:
		return postgresStorage(ctx, d)
	case dialect.MySQL:
		return mysqlStorage(ctx, d)
	case dialect.SQLite:
		return sqliteStorage(ctx, d)
	}
	return Storage{}, nil
}

// postgresStorage reads each table's total size (heap, indexes, TOAST)
// and its dead tuples. n_dead_tup comes from the statistics system, which
// backends update when they go idle or at most about once a second.
func postgresStorage(ctx context.Context, d dialect.Dialect) (Storage, error) {
	t := d.Tables()
	// body and outgoing are partitioned in generations (docs/ROTATION.md):
	// each partition counts under its parent's name.
	rows, err := d.DB().QueryContext(ctx, `SELECT COALESCE(p.relname, c.relname), SUM(pg_total_relation_size(c.oid)),
			SUM(COALESCE(s.n_dead_tup, 0)), SUM(COALESCE(s.n_live_tup, 0))
		FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
			LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
		WHERE c.relkind = 'r' AND COALESCE(p.relname, c.relname) IN (?) AND c.relnamespace = to_regnamespace(current_schema())
		GROUP BY 1`, bun.List(t.All()))
	if err != nil {
		return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
	}
	defer rows.Close()
	st := Storage{TableBytes: map[string]int64{}, DeadTuples: map[string]int64{}, LiveRows: map[string]int64{}}
	for rows.Next() {
		var name string
		var size, dead, live int64
		if err := rows.Scan(&name, &size, &dead, &live); err != nil {
			return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
		}
		short := strings.TrimPrefix(name, t.Prefix)
		st.TableBytes[short], st.DeadTuples[short], st.LiveRows[short] = size, dead, live
	}
	if err := rows.Err(); err != nil {
		return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
	}
	return st, nil
}

// mysqlStorage reads InnoDB's size estimates and the history list length
// (undo not yet purged: a held read view keeps every delete-marked row,
// and index scans walk them). body and outgoing are views of their
// generations' tables (docs/ROTATION.md): each generation counts under
// its view's name.
func mysqlStorage(ctx context.Context, d dialect.Dialect) (Storage, error) {
	t := d.Tables()
	names := t.All()
	generations := []string{"_g0", "_g1", "_g2"}
	for _, g := range generations {
		names = append(names, t.Body+g, t.Outgoing+g)
	}
	rows, err := d.DB().QueryContext(ctx, `SELECT table_name, COALESCE(data_length, 0) + COALESCE(index_length, 0), COALESCE(table_rows, 0)
		FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' AND table_name IN (?)`, bun.List(names))
	if err != nil {
		return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
	}
	defer rows.Close()
	st := Storage{TableBytes: map[string]int64{}, LiveRows: map[string]int64{}}
	for rows.Next() {
		var name string
		var size, live int64
		if err := rows.Scan(&name, &size, &live); err != nil {
			return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
		}
		short := strings.TrimPrefix(name, t.Prefix)
		for _, g := range generations {
			short = strings.TrimSuffix(short, g)
		}
		st.TableBytes[short] += size
		st.LiveRows[short] += live
	}
	if err := rows.Err(); err != nil {
		return Storage{}, fmt.Errorf("bench: table sizes of %s*: %w", t.Prefix, err)
	}
	// A server without the metric (or the privilege) reports 0: it is
	// evidence, not a figure, and must not fail the run.
	_ = d.DB().QueryRowContext(ctx,
		"SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'").Scan(&st.HistoryLength)
	return st, nil
}

// sqliteStorage reads the sizes of the database file and its WAL: tables
// share the file, and a reader that holds a read transaction stops
// checkpoints from going past it, so the WAL grows.
func sqliteStorage(ctx context.Context, d dialect.Dialect) (Storage, error) {
	path, err := sqlitePath(ctx, d.DB())
	if err != nil || path == "" {
		return Storage{}, err
	}
	var st Storage
	if fi, err := os.Stat(path); err == nil {
		st.FileBytes = fi.Size()
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		st.WALBytes = fi.Size()
	}
	return st, nil
}

// sqlitePath is the main database's file ("" for an in-memory one).
func sqlitePath(ctx context.Context, db *bun.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", fmt.Errorf("bench: sqlite database_list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", fmt.Errorf("bench: sqlite database_list: %w", err)
		}
		if name == "main" {
			return file, rows.Err()
		}
	}
	return "", rows.Err()
}

// summary is a Storage in a few totals, for Extra: what changed, not
// which table changed it (soak samples keep the per-table figures).
func (s Storage) summary() map[string]int64 {
	out := map[string]int64{}
	if len(s.TableBytes) > 0 {
		var total int64
		for _, n := range s.TableBytes {
			total += n
		}
		out["table_bytes"] = total
	}
	if len(s.DeadTuples) > 0 {
		var total int64
		for _, n := range s.DeadTuples {
			total += n
		}
		out["dead_tuples"] = total
	}
	if s.HistoryLength > 0 {
		out["history_length"] = s.HistoryLength
	}
	if s.FileBytes > 0 {
		out["file_bytes"] = s.FileBytes
	}
	if s.WALBytes > 0 {
		out["wal_bytes"] = s.WALBytes
	}
	return out
}

// waitingVacuum counts acked outgoing rows the vacuum has not pruned yet
// (seq at or below the partition's cursor). It counts partition by
// partition along outgoing's primary key, so its cost is the rows it
// counts: a join of outgoing with processor is planned blind when nothing
// has analyzed them (autovacuum off), and PostgreSQL keeps several
// versions of a processor row, so that join ran for minutes at 1,024
// partitions and starved the pipeline it was measuring. The highest
// processed_seq of a partition is its cursor: acks only move it forward.
func waitingVacuum(ctx context.Context, d dialect.Dialect) (int64, error) {
	t := d.Tables()
	var n int64
	if err := d.DB().NewRaw(`SELECT COALESCE(SUM(c.n), 0) FROM (SELECT (SELECT COUNT(*) FROM ? o
		WHERE o.partition_id = p.partition_id AND o.seq <= p.processed_seq) AS n
	FROM (SELECT partition_id, MAX(processed_seq) AS processed_seq FROM ? GROUP BY partition_id) p) c`,
		bun.Ident(t.Outgoing), bun.Ident(t.Processor)).Scan(ctx, &n); err != nil {
		return 0, fmt.Errorf("bench: count acked rows of %s: %w", t.Outgoing, err)
	}
	return n, nil
}

// processMemory is the Go heap live after the last collection (steady,
// unlike the heap in use, which swings with each GC cycle), the resident
// set, and the goroutine count.
func processMemory() (heapLive, rss int64, goroutines int) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		heapLive = int64(s[0].Value.Uint64())
	}
	kb, _ := procField("/proc/self/status", "VmRSS")
	return heapLive, kb * 1024, runtime.NumGoroutine()
}

// holdSnapshot opens, on a connection of its own, a transaction that reads
// an unrelated table and stays open until release: what a long report
// query or a forgotten session does to the database seqbox shares.
//
//   - PostgreSQL: REPEATABLE READ, so the snapshot of the first SELECT is
//     kept (xmin held back: no dead row newer than it can be removed).
//   - MySQL/MariaDB: WITH CONSISTENT SNAPSHOT under REPEATABLE READ, set
//     for this transaction because the session default may be READ
//     COMMITTED, under which the read view would close after each
//     statement (purge held back).
//   - SQLite: a deferred BEGIN whose SELECT takes a read mark in the WAL
//     (checkpoints cannot pass it).
//
// It returns a description of what it holds, for the report.
func holdSnapshot(ctx context.Context, r *run) (release func(context.Context) error, what string, err error) {
	db, name := r.d.DB(), r.d.Name()
	table := r.prefix + "unrelated"
	if err := writeLocked(r.d, func() error {
		if _, err := db.NewRaw("CREATE TABLE ? (id INTEGER PRIMARY KEY)", bun.Ident(table)).Exec(ctx); err != nil {
			return err
		}
		_, err := db.NewRaw("INSERT INTO ? (id) VALUES (1)", bun.Ident(table)).Exec(ctx)
		return err
	}); err != nil {
		return nil, "", fmt.Errorf("bench: create %s: %w", table, err)
	}
	dropTable := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		return writeLocked(r.d, func() error {
			_, err := db.NewRaw("DROP TABLE IF EXISTS ?", bun.Ident(table)).Exec(ctx)
			return err
		})
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("bench: connection for the held snapshot: %w", err), dropTable(ctx))
	}
	var begin []string
	switch name {
	case dialect.Postgres:
		begin, what = []string{"BEGIN ISOLATION LEVEL REPEATABLE READ"}, "REPEATABLE READ transaction"
	case dialect.MySQL:
		begin = []string{"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT"}
		what = "REPEATABLE READ transaction WITH CONSISTENT SNAPSHOT"
	default:
		begin, what = []string{"BEGIN"}, "read transaction (WAL read mark)"
	}
	what += " on a separate connection, one SELECT on an unrelated table, open for the whole window"
	closeConn := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		_, rerr := conn.ExecContext(ctx, "ROLLBACK")
		return errors.Join(rerr, conn.Close(), dropTable(ctx))
	}
	for _, stmt := range begin {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return nil, "", errors.Join(fmt.Errorf("bench: held snapshot: %s: %w", stmt, err), closeConn(ctx))
		}
	}
	var n int
	if err := conn.NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(table)).Scan(ctx, &n); err != nil {
		return nil, "", errors.Join(fmt.Errorf("bench: held snapshot: read %s: %w", table, err), closeConn(ctx))
	}
	if name == dialect.Postgres {
		// Proof that the snapshot is held: the backend advertises an xmin.
		var xmin sql.NullString
		if err := conn.QueryRowContext(ctx, "SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&xmin); err != nil || !xmin.Valid {
			return nil, "", errors.Join(fmt.Errorf("bench: held snapshot: the backend holds no xmin (%v)", err), closeConn(ctx))
		}
		what += " (backend xmin " + xmin.String + ")"
	}
	return closeConn, what, nil
}

// writeLocked runs fn under the dialect's single-writer lock (SQLite), so
// the harness's own writes queue with seqbox's instead of meeting
// SQLITE_BUSY.
func writeLocked(d dialect.Dialect, fn func() error) error {
	unlock := d.LockWriter()
	defer unlock()
	return fn()
}

// setAutovacuum applies Options.PGAutovacuum on PostgreSQL: ALTER SYSTEM
// and a configuration reload, then waits until a new statement sees the
// value (the reload reaches each backend at its next command). restore
// puts back what postgresql.auto.conf held before (or removes the entry)
// and records the outcome in the returned Autovacuum; it uses its own
// context, so it runs after an interrupt too.
func setAutovacuum(ctx context.Context, db *bun.DB, mode string) (av *Autovacuum, restore func(), err error) {
	av = &Autovacuum{Mode: mode}
	if av.Before, err = showAutovacuum(ctx, db); err != nil {
		return nil, nil, err
	}
	av.During = av.Before
	if mode == AutovacuumLeave {
		return av, func() {}, nil
	}
	// The ALTER SYSTEM entry there was before, if any, is what to put back.
	var previous sql.NullString
	err = db.QueryRowContext(ctx, `SELECT setting FROM pg_file_settings
		WHERE name = 'autovacuum' AND sourcefile LIKE '%postgresql.auto.conf' ORDER BY seqno DESC LIMIT 1`).Scan(&previous)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("bench: read postgresql.auto.conf's autovacuum: %w", err)
	}
	restore = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		stmt := "ALTER SYSTEM RESET autovacuum"
		if previous.Valid {
			stmt = "ALTER SYSTEM SET autovacuum = " + quoteSetting(previous.String)
		}
		var rerr error
		if av.Restored, rerr = applyAutovacuum(ctx, db, stmt, av.Before); rerr != nil {
			av.RestoreError = rerr.Error()
		}
	}
	av.During, err = applyAutovacuum(ctx, db, "ALTER SYSTEM SET autovacuum = "+quoteSetting(mode), mode)
	if err != nil {
		restore()
		return nil, nil, err
	}
	return av, restore, nil
}

// autovacuumSettle bounds the wait for a reload to reach new statements.
const autovacuumSettle = 10 * time.Second

// applyAutovacuum runs stmt, reloads the configuration and waits until
// SHOW autovacuum says want; it returns the value seen last.
func applyAutovacuum(ctx context.Context, db *bun.DB, stmt, want string) (string, error) {
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return "", fmt.Errorf("bench: %s: %w", stmt, err)
	}
	if _, err := db.ExecContext(ctx, "SELECT pg_reload_conf()"); err != nil {
		return "", fmt.Errorf("bench: pg_reload_conf: %w", err)
	}
	deadline := time.Now().Add(autovacuumSettle)
	for {
		got, err := showAutovacuum(ctx, db)
		if err != nil || got == want {
			return got, err
		}
		if time.Now().After(deadline) {
			// A setting on the server's command line outranks ALTER SYSTEM.
			return got, fmt.Errorf("bench: autovacuum is still %s %v after %q and a reload (set on the command line?)", got, autovacuumSettle, stmt)
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("bench: waiting for autovacuum = %s: %w", want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func showAutovacuum(ctx context.Context, db *bun.DB) (string, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SHOW autovacuum").Scan(&v); err != nil {
		return "", fmt.Errorf("bench: SHOW autovacuum: %w", err)
	}
	return v, nil
}

// quoteSetting quotes a setting value for ALTER SYSTEM, which takes no
// parameters. Values come from a fixed list or from pg_file_settings.
func quoteSetting(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
