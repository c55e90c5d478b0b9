package kit

import (
	"context"

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
// one transaction (SQLite, where statements are in-process calls; its
// VacuumDelete runs them once per generation).
type VacuumRangeSQL struct {
	// Bodies and Outgoing delete the body, then the outgoing rows of
	// partition ?pid in seqs (?from, ?to].
	Bodies   *Stmt
	Outgoing *Stmt
	// SetPruned records ?to as partition ?pid's pruned seq, monotonic:
	// overlapping sweeps of two processes never move it back.
	SetPruned *Stmt
}
