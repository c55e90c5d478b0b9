package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// Move floors (MariaDB). A move reads a partition's incoming rows by the
// (partition_id, id) index from the partition's start. The rows earlier
// moves deleted stay in that index, delete-marked, while any read view
// may still see them, and every read walks them again: under a read view
// held for a minute, one partition's read went from 2.5 to 43 ms and the
// several-partition head read from 29 to 554 ms (BENCHMARKS.md, "MariaDB:
// the buffer pool, and what a held read view costs"). A floor is an id at
// and below which every row of the partition is known moved, so the read
// starts above it. It is PostgreSQL's lower bound (sequencer.go there)
// for a database that has no transaction id on its rows.
//
// What makes a floor safe is the fence, safe: every incoming id at or
// below it is final, its transaction committed or rolled back, so a read
// that begins after safe was published sees every row at or below it
// that exists. After a move whose read began with safe = S and read
// partition p up to id L, every row of p at or below min(L, S) is moved,
// and every row at or below S when the read was not full (it saw all
// there was); the floor becomes the larger of that and its old value
// (moved). A move that got no lock, or failed, teaches nothing.
//
// The fence advances in two steps (fenceStep), from the move path at most
// every fenceEvery. First the candidate M, the highest id any move of this
// process has read: ids are allocated in increasing order, so every id at
// or below M was allocated before the step began. Then the transactions
// with writes open at that moment, from information_schema.INNODB_TRX:
// once each of them has ended, M is published. Two facts make that
// exact:
//   - every transaction that allocates an incoming id has already written
//     in InnoDB, its message's body row, in the same transaction (the
//     enqueue writes bodies first, and MessageInsertMany always runs in a
//     transaction; inTransaction): it is listed, trx_rows_modified > 0,
//     from before its allocation until it ends. An INSERT's own
//     AUTO_INCREMENT is allocated before InnoDB starts its transaction, so
//     an autocommit INSERT into incoming would not be listed while it
//     runs.
//   - INNODB_TRX is a cache, refreshed on a read only when nobody has read
//     it for 0.1 s: readers more frequent than that keep it stale for good.
//     The listing that begins a fence is read in a transaction of its own
//     that has read an InnoDB row first, and is used only when that
//     transaction is in it (the canary): the cache was filled after the
//     step began. A stale listing can only delay a fence, never pass one.
//     Steps come every 200–400 ms, at random, so that the fences of
//     several processes do not fall into a rhythm that keeps the cache
//     stale.
//
// A read-only transaction, however long (a report, a backup's consistent
// snapshot), has no rows modified and never holds the fence: that is the
// read view the floors are for. A long transaction with writes holds it
// until it ends, and reads then cost what they did without floors. The
// listing needs the PROCESS privilege; without it the floors stay at 0,
// which is the read from each partition's start. Floors live in the
// process: a restart, or another process's sequencer, starts from 0, and
// any floor lower than the true one is safe (docs/ARCHITECTURE.md, "Cost
// that stays flat", move floors).
type moveFloors struct {
	mu    sync.Mutex
	safe  int64           // every incoming id at or below it is final
	seen  int64           // the highest id a move read: the next candidate
	floor map[int64]int64 // per partition: every row at or below it is moved
	off   bool            // the server refused the listing: no floors

	step  sync.Mutex // one fence step at a time; the rest below it
	next  time.Time  // no step before this
	fence *fence     // the fence under way, if any
}

// fence is a candidate waiting for the transactions open when it began.
type fence struct {
	at   int64           // published as safe once wait is empty
	wait map[uint64]bool // the trx_ids of transactions with writes
}

// fenceEvery is how often, at least, the move path tries a fence step,
// and fenceJitter the random part added to it (see moveFloors). A step is
// one or two cheap reads, on the goroutine of the move that runs it.
const fenceEvery, fenceJitter = 200 * time.Millisecond, 200 * time.Millisecond

// floorsSQL are the fence's statements.
type floorsSQL struct {
	// Canary starts the listing's InnoDB transaction by reading a row.
	Canary *kit.Stmt
	// Writers lists the transactions with writes and whether the
	// listing's own transaction is in the cache (the canary).
	Writers *kit.Stmt
}

var floorSQL = floorsSQL{
	Canary: kit.Inline(`SELECT COUNT(*) FROM (SELECT id FROM {partitions} LIMIT 1) p`),
	Writers: kit.Inline(`SELECT t.trx_id, t.trx_mysql_thread_id = CONNECTION_ID() AS own
FROM information_schema.INNODB_TRX t WHERE t.trx_rows_modified > 0 OR t.trx_mysql_thread_id = CONNECTION_ID()`),
}

// before returns each of pids' floors and the fence, for a move about to
// begin, and whether the move should record what it reads (after). Without
// floors (MySQL, or the listing refused) every floor is 0.
func (f *moveFloors) before(pids []int64) (*kit.MoveFloors, int64, bool) {
	m := &kit.MoveFloors{After: make(map[int64]int64, len(pids))}
	if f == nil {
		return m, 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off {
		return m, 0, false
	}
	for _, pid := range pids {
		if v := f.floor[pid]; v > 0 {
			m.After[pid] = v
		}
	}
	return m, f.safe, true
}

// after records what a committed move read: for each partition it locked
// (results not Skipped), its new floor (see moveFloors). full reports
// whether the read of a partition stopped at the limit.
func (f *moveFloors) after(m *kit.MoveFloors, safe int64, locked []int64, full func(pid int64) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.floor == nil {
		f.floor = map[int64]int64{}
	}
	for _, pid := range locked {
		floor := safe
		if full(pid) {
			floor = min(m.Last[pid], safe)
		}
		f.floor[pid] = max(f.floor[pid], floor)
		f.seen = max(f.seen, m.Last[pid])
	}
}

// stop turns the floors off for good: an INSERT into incoming may have run
// outside a transaction (inTransaction), which the fence cannot see.
func (f *moveFloors) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off = true
}

// tick runs a fence step when one is due and no other goroutine is running
// one. Its errors only delay the fence: floors are an optimisation, and a
// move never fails for them.
func (d *mysqlDialect) tick(ctx context.Context) {
	f := d.floors
	if f == nil || !f.step.TryLock() {
		return
	}
	defer f.step.Unlock()
	now := time.Now()
	if now.Before(f.next) {
		return
	}
	f.next = now.Add(fenceEvery + rand.N(fenceJitter))
	if err := d.fenceStep(ctx); err != nil && isAccessDenied(err) {
		f.stop()
	}
}

// fenceStep begins a fence or checks the one under way (see moveFloors).
// The caller holds f.step.
func (d *mysqlDialect) fenceStep(ctx context.Context) error {
	f := d.floors
	f.mu.Lock()
	candidate, safe, off := f.seen, f.safe, f.off
	f.mu.Unlock()
	if off {
		return nil
	}
	if f.fence == nil {
		if candidate <= safe {
			return nil
		}
		wait, fresh, err := d.writers(ctx, true)
		if err != nil || !fresh {
			return err
		}
		f.fence = &fence{at: candidate, wait: wait}
	} else {
		open, _, err := d.writers(ctx, false)
		if err != nil {
			return err
		}
		for id := range f.fence.wait {
			if !open[id] {
				delete(f.fence.wait, id)
			}
		}
	}
	if len(f.fence.wait) > 0 {
		return nil
	}
	f.mu.Lock()
	f.safe = max(f.safe, f.fence.at)
	f.mu.Unlock()
	f.fence = nil
	return nil
}

// writers lists the trx_ids of the transactions with writes. With canary,
// in a transaction that has read an InnoDB row first, and fresh reports
// whether the cache holds that transaction: filled after it began.
func (d *mysqlDialect) writers(ctx context.Context, canary bool) (map[uint64]bool, bool, error) {
	var rows []struct {
		ID  uint64 `bun:"trx_id"`
		Own bool   `bun:"own"`
	}
	read := func(ctx context.Context, conn bun.IConn) error {
		if canary {
			var n int
			if err := d.Query(ctx, conn, floorSQL.Canary, nil, &n); err != nil {
				return err
			}
		}
		return d.Query(ctx, conn, floorSQL.Writers, nil, &rows)
	}
	var err error
	if canary {
		err = d.DB().RunInTx(ctx, &sql.TxOptions{ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error { return read(ctx, tx) })
	} else {
		err = read(ctx, d.DB())
	}
	if err != nil {
		return nil, false, fmt.Errorf("seqbox: listing InnoDB transactions: %w", err)
	}
	out := make(map[uint64]bool, len(rows))
	fresh := false
	for _, r := range rows {
		if r.Own {
			fresh = true
			continue
		}
		out[r.ID] = true
	}
	return out, fresh, nil
}
