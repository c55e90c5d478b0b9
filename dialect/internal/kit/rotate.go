package kit

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// Tables rotated instead of pruned (docs/ROTATION.md): body and outgoing
// live in three generations, each its own pair of tables ({body}_gN,
// {outgoing}_gN; partitions of one parent on PostgreSQL, separate tables
// on MariaDB and SQLite). New messages go to the current generation; a
// message's outgoing row goes to its body's generation. A closed
// generation whose every message is acked is truncated whole, instead of
// deleted row by row. What decides a truncation is the dialect's: checks
// made while nothing can write the generation (its tables locked; on
// SQLite, the one write transaction), in Rotation.Truncate. The rest of a
// round, the same on every database, is here.

// Generations is the number of generations body and outgoing rotate in.
const Generations = 3

// The generation states, as {generations}.state holds them.
const (
	GenCurrent = "current"
	GenClosed  = "closed"
	GenEmpty   = "empty"
)

// GenTables are generation gen's two tables as ?body and ?outgoing
// values, for the statements that name one generation.
func GenTables(t dialect.Tables, gen int) Args {
	return Args{"body": GenTable(t.Body, gen), "outgoing": GenTable(t.Outgoing, gen)}
}

// PerGeneration is a statement for each generation, from its text for
// one: stmt(g) names generation g's tables.
func PerGeneration(stmt func(g int) *Stmt) [Generations]*Stmt {
	var out [Generations]*Stmt
	for g := range out {
		out[g] = stmt(g)
	}
	return out
}

// genStmt is stmts' statement of generation gen, or an error for a
// generation that is none of them (a row's body_gen read from the
// database, say), rather than an index out of range.
func genStmt(stmts [Generations]*Stmt, gen int16) (*Stmt, error) {
	if gen < 0 || int(gen) >= Generations {
		return nil, fmt.Errorf("seqbox: generation %d is not one of 0..%d", gen, Generations-1)
	}
	return stmts[gen], nil
}

// GenTable is generation gen's table of base (the body or outgoing
// table's name) as a value: {body}_gN.
func GenTable(base string, gen int) bun.Ident { return bun.Ident(base + "_g" + strconv.Itoa(gen)) }

// genRefresh is how old the cached generation may get before an enqueue
// starts reading it again.
const genRefresh = time.Second

// GenCache caches the current generation for enqueue. Until it is first
// read, it says 0: a stale generation only delays a truncation, never
// loses a row (docs/ROTATION.md, "Why a commit racing the lock cannot be
// lost"), so a cache that is wrong is safe, only slower to free space.
type GenCache struct {
	gen        atomic.Int32
	at         atomic.Int64 // time.Now().UnixNano() of the last read, 0 never
	refreshing atomic.Bool
	mu         sync.Mutex // serialises writers, so that a read never overwrites a newer one
	version    uint64     // under mu: writes so far
}

// Current is the cached generation. When it is older than genRefresh it
// starts one read (current, on the database) in the background: the
// caller's enqueue never waits for it and runs no extra statement in its
// transaction. The value returned is the one cached before that read
// began, whatever the scheduler does: a process that has not read the
// generation yet writes 0, which the stale-writer tests rely on.
func (g *GenCache) Current(r *Runner, current *Stmt) int16 {
	gen := int16(g.gen.Load())
	if time.Since(time.Unix(0, g.at.Load())) > genRefresh && g.refreshing.CompareAndSwap(false, true) {
		g.mu.Lock()
		v := g.version
		g.mu.Unlock()
		go func() {
			defer g.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var cur []int16
			if err := r.Query(ctx, r.DB(), current, nil, &cur); err == nil && len(cur) == 1 {
				g.store(int(cur[0]), v)
			}
		}()
	}
	return gen
}

// Set records gen as current, read now.
func (g *GenCache) Set(gen int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.version++
	g.gen.Store(int32(gen))
	g.at.Store(time.Now().UnixNano())
}

// store records gen, read in the background, unless a write newer than the
// read's start (version) came first: the rotator's own switch, say.
func (g *GenCache) store(gen int, version uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.version != version {
		return
	}
	g.version++
	g.gen.Store(int32(gen))
	g.at.Store(time.Now().UnixNano())
}

// RotateSQL is the rotator's statements that every rotating dialect has.
type RotateSQL struct {
	// Current reads the current generation.
	Current *Stmt
	// State reads every generation, in gen order: gen, state; old,
	// whether it was opened more than ?interval_us ago; size, the bytes
	// its two tables take (GenRow).
	State *Stmt
	// Empty reads whether ?body and ?outgoing hold no row at all (a
	// closed generation nothing was written to is marked empty without
	// truncating it: no lock).
	Empty *Stmt
	// PendingCursors lists the partitions that hold a message of
	// generation ?gen not acked (?outgoing its outgoing table), with
	// their cursors: partition_id, processed_seq. It finds them as the
	// dialect's truncation check does.
	PendingCursors *Stmt
	// MarkEmpty marks closed generation ?gen empty.
	MarkEmpty *Stmt
	// Switch closes current generation ?from and opens empty generation
	// ?to, both or neither (the states moved meanwhile); the prune's hold
	// moves with the current row. A switch that changed one row only would
	// leave two current generations, or none: a rotator that lost its turn
	// (its connection killed; on SQLite, two outboxes of one process on
	// one file) can run beside the one that took it.
	Switch *Stmt
	// Demote closes every current generation but ?keep: it repairs the
	// two current generations that releases whose Switch could change one
	// row left after such a race (a stale current one is pinned, and with
	// it the rotation, for good).
	Demote *Stmt
	// Hold pauses the row-by-row prune until ?hold_us from now, or ends
	// the pause (?hold_us 0); the dialect's VacuumCounterList lists nothing
	// while it holds.
	Hold *Stmt
	// Pruned moves each partition's pruned_seq up to what is now gone: the
	// seq below the first row left above it, never past the cursor. A move
	// running meanwhile adds rows only above the cursor.
	Pruned *Stmt
}

// GenRow is one generation as RotateSQL.State reads it.
type GenRow struct {
	Gen   int    `bun:"gen"`
	State string `bun:"state"`
	Old   bool   `bun:"old"`
	Size  int64  `bun:"size"`
	// BodyPages and OutgoingPages are the tables' pages, where the
	// dialect keeps a floor of pages under them (PostgreSQL); 0 elsewhere.
	BodyPages     int64 `bun:"body_pages"`
	OutgoingPages int64 `bun:"outgoing_pages"`
}

// Rotation is one dialect's rotator: RotateSQL and what differs between
// databases, the turn and the truncation.
type Rotation struct {
	R     *Runner
	SQL   RotateSQL
	Gens  *GenCache
	Stall *StallWatch
	// Turn takes the rotator's turn on conn, a connection of its own
	// (one process at a time rotates), and returns its release; got is
	// false when another process has it.
	Turn func(ctx context.Context, conn bun.Conn) (release func(), got bool, err error)
	// Truncate empties closed generation g, which holds rows, if every
	// message in it is acked, and marks it empty; it returns why not
	// otherwise. The decision must be made under a lock that keeps every
	// writer of g out (docs/ROTATION.md).
	Truncate func(ctx context.Context, g int, lockTimeout time.Duration) (dialect.RotateReason, error)
	// Maintain, when set, runs once per round under the turn after the
	// truncations, with every generation's row (PostgreSQL's floor).
	Maintain func(ctx context.Context, rows []GenRow) error
	// CursorArgs, when set, adds to PendingCursors' arguments.
	CursorArgs Args
}

// Round runs one round of the rotation; see vacuum.Rotator. Every process
// reads the current generation (enqueue's cache); the process that holds
// the turn also truncates closed generations, switches the current one
// when it is due, and holds or releases the row-by-row prune.
func (rot *Rotation) Round(ctx context.Context, p *dialect.TableRotateParams) (dialect.TableRotateResult, error) {
	var res dialect.TableRotateResult
	_, cur, err := rot.State(ctx, p.Interval)
	if err != nil {
		return res, err
	}
	rot.Gens.Set(cur)
	res.Current = cur
	conn, err := rot.R.DB().Conn(ctx)
	if err != nil {
		return res, rot.R.Wrap(err)
	}
	defer conn.Close()
	release, got, err := rot.Turn(ctx, conn)
	if err != nil || !got {
		return res, err
	}
	defer release()
	res.Turn = true
	// State again, under the turn: the previous holder may have moved it.
	rows, cur, err := rot.State(ctx, p.Interval)
	if err != nil {
		return res, err
	}
	if closeOtherCurrents(rows, cur) {
		if _, err := rot.write(ctx, rot.SQL.Demote, Args{"keep": cur}); err != nil {
			return res, err
		}
	}
	// The oldest closed generation first: it is the next to open.
	for _, g := range []int{(cur + 1) % Generations, (cur + 2) % Generations} {
		if rows[g].State != GenClosed {
			continue
		}
		truncated, reason, err := rot.truncate(ctx, g, p.LockTimeout)
		if err != nil {
			return res, fmt.Errorf("seqbox: rotate: truncate generation %d: %w", g, err)
		}
		if reason != "" {
			res.Refused = append(res.Refused, dialect.RotateRefusal{Gen: g, Reason: reason})
			continue
		}
		rows[g].State = GenEmpty
		if truncated {
			res.Truncated = append(res.Truncated, g)
		}
	}
	if rot.Maintain != nil {
		if err := rot.Maintain(ctx, rows); err != nil {
			return res, err
		}
	}
	if len(res.Truncated) > 0 {
		if _, err := rot.write(ctx, rot.SQL.Pruned, nil); err != nil {
			return res, err
		}
	}
	due := rows[cur].Old || (p.Size > 0 && rows[cur].Size > p.Size)
	if due {
		next := (cur + 1) % Generations
		if rows[next].State != GenEmpty {
			res.Pinned = true
		} else if n, err := rot.write(ctx, rot.SQL.Switch, Args{"from": cur, "to": next}); err != nil {
			// An idle current generation is switched too: closing it costs
			// two row updates, and a closed generation that holds nothing
			// is marked empty without a lock; and so a pinned generation
			// comes round as the next one, and pins, whether messages flow
			// or not.
			return res, err
		} else if n == 2 {
			rot.Gens.Set(next)
			res.Switched, res.Current = true, next
		}
	}
	if res.Pinned && p.StallAfter > 0 && (p.DrainLimit <= 0 || rows[cur].Size <= p.DrainLimit) {
		if res.Draining, err = rot.draining(ctx, (cur+1)%Generations, p); err != nil {
			return res, err
		}
	} else if !res.Pinned {
		rot.Stall.Reset()
	}
	hold := p.Hold
	if res.Pinned && !res.Draining {
		hold = 0
	}
	if _, err := rot.write(ctx, rot.SQL.Hold, Args{"hold_us": hold.Microseconds()}); err != nil {
		return res, err
	}
	return res, nil
}

// write runs one of the round's writes (autocommit) through the runner's
// writer and returns how many rows it changed. On a database with one
// writer (SQLite) a write beside it would poll for the database's lock
// while the pipeline's transactions follow one another through the
// writer, and could wait out the busy timeout; elsewhere it is Exec.
func (rot *Rotation) write(ctx context.Context, s *Stmt, args Args) (int64, error) {
	res, err := rot.R.Write(ctx, s, args)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return n, rot.R.Wrap(err)
}

// truncate empties closed generation g: marks it empty without a lock when
// it holds no row at all (nothing to free; nothing pending either: an
// incoming row's body is in its generation, committed with it; a stale
// writer may still add rows to an empty generation, as to a truncated
// one), else asks the dialect.
func (rot *Rotation) truncate(ctx context.Context, g int, lockTimeout time.Duration) (truncated bool, _ dialect.RotateReason, _ error) {
	var empty bool
	if err := rot.R.Query(ctx, rot.R.DB(), rot.SQL.Empty, GenTables(rot.R.Tables(), g), &empty); err != nil {
		return false, "", err
	}
	if empty {
		_, err := rot.write(ctx, rot.SQL.MarkEmpty, Args{"gen": g})
		return false, "", err
	}
	reason, err := rot.Truncate(ctx, g, lockTimeout)
	return err == nil && reason == "", reason, err
}

// draining reports whether pinned generation g is draining: every
// partition holding its messages not acked has acked some since the look
// p.StallAfter ago (StallWatch). Then the prune stays held: the
// generation will be truncated once drained, and the prune would only
// delete rows that the truncation removes anyway (a 5M-message drain ran
// at 0.68 of a 1M one with the prune, 1.03 without; docs/ROTATION.md).
// The caller bounds how large the current generation may grow meanwhile
// (p.DrainLimit).
func (rot *Rotation) draining(ctx context.Context, g int, p *dialect.TableRotateParams) (bool, error) {
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	due, stuck := rot.Stall.Due(g, now, p.StallAfter)
	if !due {
		return !stuck, nil
	}
	var rows []struct {
		PartitionID  int64 `bun:"partition_id"`
		ProcessedSeq int64 `bun:"processed_seq"`
	}
	args := Args{"gen": g, "outgoing": GenTables(rot.R.Tables(), g)["outgoing"]}
	for k, v := range rot.CursorArgs {
		args[k] = v
	}
	if err := rot.R.Query(ctx, rot.R.DB(), rot.SQL.PendingCursors, args, &rows); err != nil {
		return false, err
	}
	cursors := make(map[int64]int64, len(rows))
	for _, r := range rows {
		cursors[r.PartitionID] = r.ProcessedSeq
	}
	return !rot.Stall.Look(g, now, cursors), nil
}

// closeOtherCurrents reports whether a generation besides cur is current,
// and marks it closed in rows, as SQL.Demote is to make it. Closing any
// generation is safe: a truncation checks what it holds under its lock,
// and a writer whose cached generation is closed writes on into it
// (docs/ROTATION.md).
func closeOtherCurrents(rows []GenRow, cur int) bool {
	found := false
	for i := range rows {
		if i != cur && rows[i].State == GenCurrent {
			rows[i].State, found = GenClosed, true
		}
	}
	return found
}

// State reads the generations, indexed by gen, and the current one (the
// last, should a race of an earlier release have left two).
func (rot *Rotation) State(ctx context.Context, interval time.Duration) ([]GenRow, int, error) {
	if interval <= 0 {
		interval = 100 * 365 * 24 * time.Hour // never by age
	}
	var rows []GenRow
	if err := rot.R.Query(ctx, rot.R.DB(), rot.SQL.State, Args{"interval_us": interval.Microseconds()}, &rows); err != nil {
		return nil, 0, err
	}
	cur := -1
	for i, r := range rows {
		if r.Gen != i {
			return nil, 0, fmt.Errorf("seqbox: rotate: generation %d found at row %d: the generations table is damaged", r.Gen, i)
		}
		if r.State == GenCurrent {
			cur = i
		}
	}
	if len(rows) != Generations || cur < 0 {
		return nil, 0, fmt.Errorf("seqbox: rotate: %d generations, current %d: the generations table is damaged", len(rows), cur)
	}
	return rows, cur, nil
}
