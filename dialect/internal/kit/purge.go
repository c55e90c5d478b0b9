package kit

import (
	"context"
	"encoding/json"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// PurgeSQL is the statements of a partition's purge (docs/ARCHITECTURE.md,
// "Purge"). ?headers is the filter as one JSON object of every header
// that must match; a body matches when its headers contain it.
type PurgeSQL struct {
	// LockPartition row-locks partition ?pid's row, waiting: id.
	LockPartition *Stmt
	// LockProcessor row-locks partition ?pid's processor row, waiting, and
	// reads its processed_seq and lease_window: how far past the cursor a
	// live lease's batch may reach (a lease from before lease_limit
	// existed: ?largest_batch), 0 without a live lease.
	LockProcessor *Stmt
	// Incoming reads partition ?pid's matching incoming rows, up to
	// ?limit, in the order the sequencer would move them: id, body_id.
	Incoming *Stmt
	// Counts counts, in one statement, each partition of queue ?queue's
	// matching messages: partition_id, incoming, in_flight (sequenced,
	// within the lease window past the cursor), outgoing (beyond it).
	Counts *Stmt
	// Outgoing reads partition ?pid's matching, untombstoned outgoing rows
	// after seq ?after, up to ?limit, in seq order: seq, body_id.
	// CountOutgoing counts those in (?after, ?upto].
	Outgoing      *Stmt
	CountOutgoing *Stmt
	// DeleteIncoming deletes partition ?pid's incoming rows ?ids;
	// DeleteBodies bodies ?ids.
	DeleteIncoming *Stmt
	DeleteBodies   *Stmt
	// Tombstone marks partition ?pid's outgoing rows ?seqs purged.
	Tombstone *Stmt
	// BlankBodies keeps bodies ?ids (the id, for WaitProcessed and the
	// vacuum's join) but not their data: payload ?payload (empty).
	BlankBodies *Stmt
	// CountPurge counts, on partition ?pid's processor row, a purge that
	// made tombstones: a lease statement that read its batch from an older
	// snapshot sees the count changed (PostgreSQL).
	CountPurge *Stmt
	// PerGen: DeleteBodies and BlankBodies name one generation's body
	// table, ?body, and Tombstone its outgoing table, ?outgoing (MariaDB,
	// SQLite; GenTable), so each runs once per generation. A row is in one
	// generation; the others' probes find nothing. Unset where one
	// statement reaches them all.
	PerGen bool
}

// perGen runs stmt with args, once per generation when s.PerGen, with
// that generation's table of base (body or outgoing) as ?<name>.
func (s *PurgeSQL) perGen(ctx context.Context, r *Runner, tx bun.Tx, stmt *Stmt, args Args, name, base string) error {
	if !s.PerGen {
		_, err := r.Exec(ctx, tx, stmt, args)
		return err
	}
	for g := range Generations {
		args[name] = GenTable(base, g)
		if _, err := r.Exec(ctx, tx, stmt, args); err != nil {
			return err
		}
	}
	return nil
}

// headersArg renders the filter as one JSON object; ok is false when two
// headers of the same name want different values, which no message has.
func headersArg(hs []dialect.Header) (string, bool) {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		if v, seen := m[h.Key]; seen && v != h.Value {
			return "", false
		}
		m[h.Key] = h.Value
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Preview counts what a purge would take from each partition of a queue,
// in one statement and so one snapshot, changing nothing.
func (s *PurgeSQL) Preview(ctx context.Context, r *Runner, p *dialect.PurgePreviewParams) (map[int64]dialect.PurgeResult, error) {
	headers, satisfiable := headersArg(p.Headers)
	if !satisfiable {
		return nil, nil
	}
	var rows []struct {
		PartitionID int64 `bun:"partition_id"`
		Incoming    int   `bun:"incoming"`
		InFlight    int   `bun:"in_flight"`
		Outgoing    int   `bun:"outgoing"`
	}
	if err := r.Query(ctx, r.DB(), s.Counts, Args{"queue": p.Queue, "headers": headers, "largest_batch": p.LeaseWindow}, &rows); err != nil {
		return nil, err
	}
	out := make(map[int64]dialect.PurgeResult, len(rows))
	for _, row := range rows {
		out[row.PartitionID] = dialect.PurgeResult{Incoming: row.Incoming, InFlight: row.InFlight, Outgoing: row.Outgoing}
	}
	return out, nil
}

// Partition purges up to p.Limit messages of each stage in one
// transaction. The partition row lock keeps the sequencer from moving rows
// meanwhile, the processor row lock keeps a lease from being taken or
// acked meanwhile (and waits out a transactional delivery), so a message
// is either purged here or delivered, never both.
func (s *PurgeSQL) Partition(ctx context.Context, r *Runner, p *dialect.PurgeParams) (dialect.PurgeResult, error) {
	headers, satisfiable := headersArg(p.Headers)
	if !satisfiable {
		return dialect.PurgeResult{}, nil
	}
	pid := p.PartitionID
	var res dialect.PurgeResult
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.PurgeResult{}
		var locked []int64
		if err := r.Query(ctx, tx, s.LockPartition, Args{"pid": pid}, &locked); err != nil {
			return err
		}
		var procs []struct {
			ProcessedSeq int64 `bun:"processed_seq"`
			LeaseWindow  int64 `bun:"lease_window"`
		}
		if err := r.Query(ctx, tx, s.LockProcessor, Args{"pid": pid, "largest_batch": p.LeaseWindow}, &procs); err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil // not a registered partition: nothing of it to purge
		}
		cursor := procs[0].ProcessedSeq
		bound := cursor + procs[0].LeaseWindow
		if bound > cursor {
			if err := r.Query(ctx, tx, s.CountOutgoing, Args{"pid": pid, "after": cursor, "upto": bound, "headers": headers},
				&res.InFlight); err != nil {
				return err
			}
		}

		var in []struct {
			ID     int64  `bun:"id"`
			BodyID []byte `bun:"body_id"`
		}
		if err := r.Query(ctx, tx, s.Incoming, Args{"pid": pid, "headers": headers, "limit": p.Limit}, &in); err != nil {
			return err
		}
		if len(in) > 0 {
			ids, bodies := make([]int64, len(in)), make([][]byte, len(in))
			for i, row := range in {
				ids[i], bodies[i] = row.ID, row.BodyID
			}
			if _, err := r.Exec(ctx, tx, s.DeleteIncoming, Args{"pid": pid, "ids": IDs(ids)}); err != nil {
				return err
			}
			if err := s.perGen(ctx, r, tx, s.DeleteBodies, Args{"ids": bun.List(bodies)}, "body", r.Tables().Body); err != nil {
				return err
			}
		}

		var out []struct {
			Seq    int64  `bun:"seq"`
			BodyID []byte `bun:"body_id"`
		}
		if err := r.Query(ctx, tx, s.Outgoing, Args{"pid": pid, "after": bound, "headers": headers, "limit": p.Limit}, &out); err != nil {
			return err
		}
		if len(out) > 0 {
			seqs, bodies := make([]int64, len(out)), make([][]byte, len(out))
			for i, row := range out {
				seqs[i], bodies[i] = row.Seq, row.BodyID
			}
			if err := s.perGen(ctx, r, tx, s.Tombstone, Args{"pid": pid, "seqs": IDs(seqs)}, "outgoing", r.Tables().Outgoing); err != nil {
				return err
			}
			if err := s.perGen(ctx, r, tx, s.BlankBodies, Args{"payload": []byte{}, "ids": bun.List(bodies)}, "body", r.Tables().Body); err != nil {
				return err
			}
			if _, err := r.Exec(ctx, tx, s.CountPurge, Args{"pid": pid}); err != nil {
				return err
			}
		}
		res.Incoming, res.Outgoing = len(in), len(out)
		res.More = len(in) == p.Limit || len(out) == p.Limit
		return nil
	})
	return res, err
}
