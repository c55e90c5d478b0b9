package kit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// WriteSQL is the end of every move, in its transaction.
type WriteSQL struct {
	// InsertOutgoing inserts ?rows (?pid, ?seq, ?body_id), sequenced now,
	// or the values InsertArgs gives, into outgoing, where the database
	// routes each row to its generation by ?gen (PostgreSQL).
	InsertOutgoing *Stmt `kit:"optional"`
	// InsertOutgoingGen[g] inserts ?rows into generation g's outgoing
	// table (MariaDB, SQLite): the rows are inserted once per generation
	// of their bodies, in practice one. Set this or InsertOutgoing.
	InsertOutgoingGen [Generations]*Stmt `kit:"optional"`
	// InsertArgs, where set, gives InsertOutgoing the rows as a few values
	// of constant number (PostgreSQL: one array per column), so that the
	// statement is prepared once instead of parsed and planned per move.
	InsertArgs func(rows []MovedRow) Args
	// DeleteIncoming deletes exactly the incoming rows a move read, given
	// as one value ?moved (DeleteArg).
	DeleteIncoming *Stmt
	// DeleteArg renders the moved rows as DeleteIncoming's ?moved.
	DeleteArg func(rows []MovedRow) any
}

// MoveSQL is the move as several simple statements (MySQL, SQLite).
type MoveSQL struct {
	// LockPartition locks partition ?pid's row, skipping it when another
	// transaction holds it, and reads its id.
	LockPartition *Stmt
	// SelectIncoming reads partition ?pid's first ?limit incoming rows in
	// FIFO order: id, body_id; where the dialect keeps move floors, only
	// rows above id ?after (MoveFloors).
	SelectIncoming *Stmt
	// Tops reads the last seq handed out of each partition ?pids (a
	// list), as one index probe each: partition_id, top. That is the top
	// of its outgoing rows, or its cursor when the vacuum has pruned them
	// all; no row keeps it (docs/ARCHITECTURE.md, "Tables and locks").
	// Read under the partition locks, in a statement after them: only
	// their holder allocates.
	Tops *Stmt
	// LockPartitions locks the free rows of partitions ?pids (a list), in
	// id order, and reads their ids.
	LockPartitions *Stmt
	// SelectHeads reads the head of line of each partition of ?pids (one
	// JSON array value, JSONArray): its first rows in id order up to the
	// one at offset ?offset (the limit − 1), in one statement whose text
	// does not change with their number; partition_id, id, body_id, in
	// any order (MoveMany sorts them).
	SelectHeads *Stmt
	// HeadArms, where set, is SelectHeads's number of arms (HeadArms): a
	// fixed text of one index read per partition, ?p<i> and ?a<i>, its
	// pid and floor, each up to ?limit rows, unused arms given pid 0 and
	// more partitions read HeadArms at a time. Unset, SelectHeads reads
	// ?pids (above), from each partition's start.
	HeadArms int
	Write    WriteSQL
}

// HeadArms is a SelectHeads text of n arms, UNION ALL, each arm being arm
// with %d replaced by its number, for MoveSQL.HeadArms.
func HeadArms(arm string, n int) string {
	arms := make([]string, n)
	for i := range arms {
		arms[i] = "(" + strings.ReplaceAll(arm, "%d", strconv.Itoa(i)) + ")"
	}
	return strings.Join(arms, "\nUNION ALL ")
}

// readHeads reads the head of line of each partition of locks: up to limit
// rows each, above its floor in f.
func (s *MoveSQL) readHeads(ctx context.Context, r *Runner, tx bun.IConn, locks []int64, limit int, f *MoveFloors) ([]headRow, error) {
	var rows []headRow
	if s.HeadArms == 0 {
		// From each partition's start: a floor below the true one is safe.
		err := r.Query(ctx, tx, s.SelectHeads, Args{"pids": JSONArray(locks), "offset": limit - 1}, &rows)
		return rows, err
	}
	for chunk := range slices.Chunk(locks, s.HeadArms) {
		args := Args{"limit": limit}
		for i := range s.HeadArms {
			var pid int64 // no partition has id 0: an unused arm reads nothing
			if i < len(chunk) {
				pid = chunk[i]
			}
			args["p"+strconv.Itoa(i)], args["a"+strconv.Itoa(i)] = pid, f.after(pid)
		}
		var part []headRow
		if err := r.Query(ctx, tx, s.SelectHeads, args, &part); err != nil {
			return nil, err
		}
		rows = append(rows, part...)
	}
	return rows, nil
}

// HeadPartitions lists, in order, which of pids have a row above their
// floor in f: the head read with one row per arm, which never reads ahead
// past a partition's range (the reconciler's list; MariaDB's).
func (s *MoveSQL) HeadPartitions(ctx context.Context, r *Runner, conn bun.IConn, pids []int64, f *MoveFloors) ([]int64, error) {
	rows, err := s.readHeads(ctx, r, conn, pids, 1, f)
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(rows))
	for _, row := range rows {
		out = append(out, row.PartitionID)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// MoveFloors carries a dialect's move floors into a move, and what the
// move read back out (MariaDB's; docs/ARCHITECTURE.md, "Cost that stays
// flat", move floors). After[pid] is an incoming id at and below which
// every row of the partition is known moved: the read starts above it
// (SelectIncoming's ?after, the arms' ?a<i>), never walking the entries
// of moved rows that InnoDB keeps while a read view may see them.
// Last[pid] is set, for each partition the move read rows of, to the
// highest id it read. A nil *MoveFloors is a dialect without floors: its
// SelectIncoming takes no ?after, and reads from each partition's start.
type MoveFloors struct {
	After map[int64]int64
	Last  map[int64]int64
}

func (f *MoveFloors) after(pid int64) int64 {
	if f == nil {
		return 0
	}
	return f.After[pid]
}

// read records the highest id read of partition pid.
func (f *MoveFloors) read(pid, id int64) {
	if f == nil {
		return
	}
	if f.Last == nil {
		f.Last = map[int64]int64{}
	}
	f.Last[pid] = max(f.Last[pid], id)
}

type incomingRead struct {
	ID     int64  `bun:"id"`
	BodyID []byte `bun:"body_id"`
	// BodyGen is the generation of the row's body, where the dialect
	// rotates its tables and its read returns it; 0 elsewhere.
	BodyGen int16 `bun:"body_gen"`
}

// Move is the one-partition move: lock the partition row, read incoming
// in order (above the partition's floor in f, which may be nil), read the
// last seq handed out, insert outgoing with the next seqs, delete exactly
// the ids read.
func (s *MoveSQL) Move(ctx context.Context, r *Runner, p *dialect.SequenceMoveParams, f *MoveFloors) (dialect.SequenceMoveResult, error) {
	var res dialect.SequenceMoveResult
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.SequenceMoveResult{PartitionID: p.PartitionID}
		if f != nil {
			clear(f.Last) // a retried transaction starts over
		}
		var locked []int64
		if err := r.Query(ctx, tx, s.LockPartition, Args{"pid": p.PartitionID}, &locked); err != nil {
			return err
		}
		if len(locked) == 0 {
			res.Skipped = true
			return nil
		}
		// A plain read: the partition lock already serialises sequencers, and
		// rows of still-open producers are invisible here; they get later seqs.
		var rows []incomingRead
		args := Args{"pid": p.PartitionID, "limit": p.Limit}
		if f != nil {
			args["after"] = f.after(p.PartitionID)
		}
		if err := r.Query(ctx, tx, s.SelectIncoming, args, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		f.read(p.PartitionID, rows[len(rows)-1].ID)
		tops, err := s.tops(ctx, r, tx, []int64{p.PartitionID})
		if err != nil {
			return err
		}
		base, n := tops[p.PartitionID], int64(len(rows))
		moved := make([]MovedRow, len(rows))
		for i, row := range rows {
			moved[i] = MovedRow{PartitionID: p.PartitionID, Seq: base + int64(i) + 1, BodyID: row.BodyID, IncomingID: row.ID, Gen: row.BodyGen}
		}
		if err := s.Write.Write(ctx, r, tx, moved); err != nil {
			return err
		}
		res = dialect.SequenceMoveResult{PartitionID: p.PartitionID, Moved: len(rows), FirstSeq: base + 1, LastSeq: base + n}
		return nil
	})
	if err != nil {
		return dialect.SequenceMoveResult{}, err
	}
	return res, nil
}

// tops reads the last seq handed out of each partition of pids, which the
// transaction has locked. A partition without a processor row (never
// registered whole) is an error, not a restart from seq 1.
func (s *MoveSQL) tops(ctx context.Context, r *Runner, tx bun.Tx, pids []int64) (map[int64]int64, error) {
	var rows []struct {
		PartitionID int64 `bun:"partition_id"`
		Top         int64 `bun:"top"`
	}
	if err := r.Query(ctx, tx, s.Tops, Args{"pids": IDs(pids)}, &rows); err != nil {
		return nil, err
	}
	out := make(map[int64]int64, len(rows))
	for _, row := range rows {
		out[row.PartitionID] = row.Top
	}
	for _, pid := range pids {
		if _, ok := out[pid]; !ok {
			return nil, fmt.Errorf("seqbox: partition %d has no processor row", pid)
		}
	}
	return out, nil
}

type headRow struct {
	PartitionID int64  `bun:"partition_id"`
	ID          int64  `bun:"id"`
	BodyID      []byte `bun:"body_id"`
	BodyGen     int16  `bun:"body_gen"` // as incomingRead's
}

func (r headRow) Keys() (pid, id int64) { return r.PartitionID, r.ID }

// sortHeads orders rows by partition, then id: each partition's rows get
// their seqs in id order (NumberRows), whatever order the plan read them in.
func sortHeads(rows []headRow) {
	slices.SortFunc(rows, func(a, b headRow) int {
		return cmp.Or(cmp.Compare(a.PartitionID, b.PartitionID), cmp.Compare(a.ID, b.ID))
	})
}

// MoveMany moves several partitions in one transaction of five statements
// whatever their number: lock the partition rows that are free, read each
// one's head of line, read the last seq handed out of those with rows,
// insert every outgoing row, delete exactly the incoming ids read.
func (s *MoveSQL) MoveMany(ctx context.Context, r *Runner, p *dialect.SequenceMoveManyParams, f *MoveFloors) ([]dialect.SequenceMoveResult, error) {
	var out []dialect.SequenceMoveResult
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if f != nil {
			clear(f.Last) // a retried transaction starts over
		}
		out = make([]dialect.SequenceMoveResult, len(p.PartitionIDs))
		for i, pid := range p.PartitionIDs {
			out[i] = dialect.SequenceMoveResult{PartitionID: pid, Skipped: true}
		}
		if len(p.PartitionIDs) == 0 {
			return nil
		}
		var locks []int64
		if err := r.Query(ctx, tx, s.LockPartitions, Args{"pids": IDs(p.PartitionIDs)}, &locks); err != nil {
			return err
		}
		locked := make(map[int64]bool, len(locks))
		for _, id := range locks {
			locked[id] = true
		}
		for i := range out {
			out[i].Skipped = !locked[out[i].PartitionID]
		}
		if len(locks) == 0 || p.Limit < 1 {
			return nil
		}
		rows, err := s.readHeads(ctx, r, tx, locks, p.Limit, f)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		sortHeads(rows)
		var withRows []int64
		for _, row := range rows {
			f.read(row.PartitionID, row.ID)
			if !slices.Contains(withRows, row.PartitionID) {
				withRows = append(withRows, row.PartitionID)
			}
		}
		tops, err := s.tops(ctx, r, tx, withRows)
		if err != nil {
			return err
		}
		moved, seqs := NumberRows(rows, tops)
		writes := make([]MovedRow, len(rows))
		for i, row := range rows {
			writes[i] = MovedRow{PartitionID: row.PartitionID, Seq: seqs[i], BodyID: row.BodyID, IncomingID: row.ID, Gen: row.BodyGen}
		}
		if err := s.Write.Write(ctx, r, tx, writes); err != nil {
			return err
		}
		FillMoved(out, moved)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PartMove is what a several-partition move does to one partition: its
// last seq handed out was Base and it gets N more rows.
type PartMove struct {
	Base int64
	N    int
}

// NumberRows gives each partition's rows the next seqs in the order read
// (the head of line's order).
func NumberRows[R interface{ Keys() (pid, id int64) }](rows []R, top map[int64]int64) (map[int64]*PartMove, []int64) {
	moved := map[int64]*PartMove{}
	seqs := make([]int64, len(rows))
	for i, row := range rows {
		pid, _ := row.Keys()
		m := moved[pid]
		if m == nil {
			m = &PartMove{Base: top[pid]}
			moved[pid] = m
		}
		m.N++
		seqs[i] = m.Base + int64(m.N)
	}
	return moved, seqs
}

// FillMoved sets each result's Moved, FirstSeq and LastSeq.
func FillMoved(out []dialect.SequenceMoveResult, moved map[int64]*PartMove) {
	for i := range out {
		if m := moved[out[i].PartitionID]; m != nil {
			out[i].Moved, out[i].FirstSeq, out[i].LastSeq = m.N, m.Base+1, m.Base+int64(m.N)
		}
	}
}

// MovedRow is an incoming row and the seq a move gives it.
type MovedRow struct {
	PartitionID int64
	Seq         int64
	BodyID      []byte
	IncomingID  int64
	// IncomingTID is the row's ctid as text, "(block,offset)", where the
	// dialect deletes by it (PostgreSQL); empty elsewhere.
	IncomingTID string
	// Gen is the generation of the row's body, which its outgoing row
	// takes, where the dialect rotates its tables; 0 elsewhere.
	Gen int16
}

// IncomingIDs are the incoming ids of moved rows.
func IncomingIDs(rows []MovedRow) []int64 {
	ids := make([]int64, len(rows))
	for i, row := range rows {
		ids[i] = row.IncomingID
	}
	return ids
}

// Write is the end of every move, in its transaction: insert the outgoing
// rows, then delete exactly the incoming rows read — a range would also
// delete a row with a smaller id that committed meanwhile, and lose that
// message.
func (s *WriteSQL) Write(ctx context.Context, r *Runner, tx bun.Tx, rows []MovedRow) error {
	if s.InsertOutgoingGen[0] == nil {
		if err := s.insert(ctx, r, tx, s.InsertOutgoing, rows); err != nil {
			return err
		}
	} else {
		gens := rowGens(rows)
		for _, gen := range gens {
			part := rows // in practice every row is in one generation: no copy
			if len(gens) > 1 {
				part = rowsOf(rows, gen)
			}
			stmt, err := genStmt(s.InsertOutgoingGen, gen)
			if err != nil {
				return err
			}
			if err := s.insert(ctx, r, tx, stmt, part); err != nil {
				return err
			}
		}
	}
	_, err := r.Exec(ctx, tx, s.DeleteIncoming, Args{"moved": s.DeleteArg(rows)})
	return err
}

// rowGens lists the generations of rows' bodies, ascending, once each.
func rowGens(rows []MovedRow) []int16 {
	gens := make([]int16, 0, Generations)
	for _, r := range rows {
		if !slices.Contains(gens, r.Gen) {
			gens = append(gens, r.Gen)
		}
	}
	slices.Sort(gens)
	return gens
}

// rowsOf is the rows of generation gen, in their order.
func rowsOf(rows []MovedRow, gen int16) []MovedRow {
	var out []MovedRow
	for _, r := range rows {
		if r.Gen == gen {
			out = append(out, r)
		}
	}
	return out
}

// insert runs stmt, InsertOutgoing or one of InsertOutgoingGen, for rows.
func (s *WriteSQL) insert(ctx context.Context, r *Runner, tx bun.Tx, stmt *Stmt, rows []MovedRow) error {
	args := Args{}
	if s.InsertArgs != nil {
		args = s.InsertArgs(rows)
	} else {
		items := make([]Item, len(rows))
		for i := range rows {
			items[i] = outgoingRow{&rows[i]}
		}
		args["rows"] = items
	}
	_, err := r.Exec(ctx, tx, stmt, args)
	return err
}

// outgoingRow is a moved row as an item of InsertOutgoing: ?pid ?seq
// ?body_id, and ?gen where the dialect rotates its tables.
type outgoingRow struct{ m *MovedRow }

func (r outgoingRow) Value(name string) (any, bool) {
	switch name {
	case "pid":
		return r.m.PartitionID, true
	case "seq":
		return r.m.Seq, true
	case "body_id":
		return r.m.BodyID, true
	case "gen":
		return r.m.Gen, true
	}
	return nil, false
}

func (r outgoingRow) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	return AppendItem(r, gen, b, name)
}
