package kit

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// VacuumCounters reads, with stmt, the partitions whose cursor is past
// what has been pruned: partition_id, pruned_seq, processed_seq.
func VacuumCounters(ctx context.Context, r *Runner, stmt *Stmt) ([]dialect.VacuumCounter, error) {
	var rows []struct {
		PartitionID  int64 `bun:"partition_id"`
		PrunedSeq    int64 `bun:"pruned_seq"`
		ProcessedSeq int64 `bun:"processed_seq"`
	}
	if err := r.Query(ctx, r.DB(), stmt, nil, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.VacuumCounter, len(rows))
	for i, row := range rows {
		out[i] = dialect.VacuumCounter{PartitionID: row.PartitionID, PrunedSeq: row.PrunedSeq, ProcessedSeq: row.ProcessedSeq}
	}
	return out, nil
}

// VacuumRangeSQL prunes one range at a time, three statements each, in
// one transaction (SQLite, where statements are in-process calls).
type VacuumRangeSQL struct {
	// Bodies and Outgoing delete the body, then the outgoing rows of
	// partition ?pid in seqs (?from, ?to].
	Bodies   *Stmt
	Outgoing *Stmt
	// SetPruned records ?to as partition ?pid's pruned seq, monotonic:
	// overlapping sweeps of two processes never move it back.
	SetPruned *Stmt
}

// Delete prunes every range and returns how many messages went.
func (s *VacuumRangeSQL) Delete(ctx context.Context, r *Runner, p *dialect.VacuumDeleteParams) (int, error) {
	var total int64
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		total = 0
		for _, rg := range p.Ranges {
			args := Args{"pid": rg.PartitionID, "from": rg.FromSeq, "to": rg.ToSeq}
			if _, err := r.Exec(ctx, tx, s.Bodies, args); err != nil {
				return err
			}
			n, err := r.Affected(ctx, tx, s.Outgoing, args)
			if err != nil {
				return err
			}
			total += n
			if _, err := r.Exec(ctx, tx, s.SetPruned, Args{"pid": rg.PartitionID, "to": rg.ToSeq}); err != nil {
				return err
			}
		}
		return nil
	})
	return int(total), err
}
