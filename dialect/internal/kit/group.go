package kit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// GroupSQL is the statements of group leases and acks (the engine's
// GroupLeaser): a few statements for many partitions. The pool groups
// the requests of every queue, and each queue has its own lease duration
// and batch size: those are per-partition CASE lists, never one value.
type GroupSQL struct {
	// LockLeasable row-locks the leasable rows of partitions ?pids (a
	// list) with work, skipping rows another transaction holds, in
	// partition order: partition_id, processed_seq, attempts.
	LockLeasable *Stmt
	// TakeLease leases partitions ?pids (a list) to ?owner, each for its
	// own duration (?lease_cases: WHEN ?pid THEN ?lease_us) with its own
	// batch limit recorded (?limit_cases: WHEN ?pid THEN ?limit), counting
	// an attempt.
	TakeLease *Stmt
	// LockOwned row-locks, waiting, the rows of partitions ?pids that
	// ?owner holds, in partition order: partition_id and top, its
	// partition's last seq handed out (the top of its outgoing rows, read
	// as an index probe, or its cursor).
	LockOwned *Stmt
	// Ack acks partitions ?pids cleanly at ?cases (WHEN ?pid THEN ?seq)
	// and releases their leases.
	Ack *Stmt
	// AckLease is Ack that also leases again, as one new row version, the
	// partitions ?more (a list) to ?owner with ?lease_cases and
	// ?limit_cases as in TakeLease, their attempt counted.
	AckLease *Stmt
	// ReadRanges reads every leased batch in one statement of constant
	// shape, so it is prepared once and planned once, whatever the number
	// of partitions (a UNION ALL arm per partition cost MySQL 0.7–3.4 ms
	// of parsing and planning at 32 partitions: BENCHMARKS.md, "MariaDB's
	// several-partition read has a constant shape"). It returns
	// partition_id and the OutgoingRow columns.
	ReadRanges *Stmt
	// RangesArgs binds the ranges, each a partition's (FromSeq, ToSeq],
	// and where the statement takes it the largest range, limit: arrays
	// on PostgreSQL, one JSON value on MySQL.
	RangesArgs func(ranges []dialect.VacuumRange, limit int) Args
	// LockArg binds the partitions of LockLeasable and LockOwned, ?pids:
	// nil binds a list (IDs); a dialect whose lock statements take one
	// array value, of a text that does not change with their number,
	// prepares them and binds it here.
	LockArg func(pids []int64) any
}

// lockArg is ?pids of the lock statements.
func (s *GroupSQL) lockArg(pids []int64) any {
	if s.LockArg == nil {
		return IDs(pids)
	}
	return s.LockArg(pids)
}

// groupState is a processor row locked by a group.
type groupState struct {
	PartitionID  int64 `bun:"partition_id"`
	ProcessedSeq int64 `bun:"processed_seq"`
	Attempts     int   `bun:"attempts"`
}

// perPartition is a CASE list: WHEN ?pid THEN ?<name>, one item per
// partition.
func perPartition(pids []int64, name string, value func(pid int64) int64) []Item {
	out := make([]Item, len(pids))
	for i, pid := range pids {
		out[i] = &caseArm{pid: pid, name: name, value: value(pid)}
	}
	return out
}

// caseArm is one WHEN ?pid THEN ?<name> of a CASE list.
type caseArm struct {
	pid   int64
	name  string
	value int64
}

func (c *caseArm) Value(name string) (any, bool) {
	switch name {
	case "pid":
		return c.pid, true
	case c.name:
		return c.value, true
	}
	return nil, false
}

func (c *caseArm) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	return AppendItem(c, gen, b, name)
}

// Lease takes several leases in one transaction of two statements (lock
// the leasable rows, lease them), then reads every batch in one more.
func (s *GroupSQL) Lease(ctx context.Context, r *Runner, p *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	owner := p.Leases[0].Owner
	pids := make([]int64, len(p.Leases))
	limits := make(map[int64]int, len(p.Leases))
	durations := make(map[int64]time.Duration, len(p.Leases))
	for i, l := range p.Leases {
		if l.Owner != owner {
			return nil, errors.New("seqbox: a group lease must be of one owner")
		}
		pids[i] = l.PartitionID
		limits[l.PartitionID], durations[l.PartitionID] = l.Limit, l.Duration
	}
	var taken []groupState
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		taken = nil
		if err := r.Query(ctx, tx, s.LockLeasable, Args{"pids": s.lockArg(pids)}, &taken); err != nil {
			return err
		}
		if len(taken) == 0 {
			return nil
		}
		ids := make([]int64, len(taken))
		for i, t := range taken {
			ids[i] = t.PartitionID
		}
		n, err := r.Affected(ctx, tx, s.TakeLease, Args{"pids": IDs(ids), "owner": owner,
			"lease_cases": perPartition(ids, "lease_us", func(pid int64) int64 { return durations[pid].Microseconds() }),
			"limit_cases": perPartition(ids, "limit", func(pid int64) int64 { return int64(limits[pid]) })})
		if err != nil {
			return err
		}
		// The rows are locked by this transaction since LockLeasable read
		// them leasable, so each is updated; anything else is a broken
		// invariant, and the lease is not taken rather than half taken.
		if n != int64(len(ids)) {
			return fmt.Errorf("seqbox: group lease: %d of %d locked partitions updated", n, len(ids))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	leases, err := s.read(ctx, r, taken, limits)
	if err != nil {
		return nil, err
	}
	out := make([]dialect.ProcessorLeaseResult, len(p.Leases))
	for i, l := range p.Leases {
		out[i] = leases[l.PartitionID]
	}
	return out, nil
}

// AckAndLease records several clean acks and takes the next lease of each
// partition with more work, in one transaction of two statements (lock
// the owned rows, then one UPDATE that acks them and leases again those
// with more), then reads the new batches in one more. An ack whose lease
// was lost reports ErrLeaseLost in its item and changes nothing.
func (s *GroupSQL) AckAndLease(ctx context.Context, r *Runner, p *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error) {
	if len(p.Items) == 0 {
		return nil, nil
	}
	owner := p.Items[0].Ack.Owner
	pids := make([]int64, len(p.Items))
	limits := make(map[int64]int, len(p.Items))
	durations := make(map[int64]time.Duration, len(p.Items))
	seqs := make(map[int64]int64, len(p.Items))
	for i, it := range p.Items {
		if err := OwnTransaction("ProcessorAckLeaseGroup", it.Ack); err != nil {
			return nil, err
		}
		if !it.Ack.Clean() || it.Ack.Owner != owner || it.Next.Owner != owner || it.Next.PartitionID != it.Ack.PartitionID {
			return nil, errors.New("seqbox: a group ack must be a clean ack of one owner with its own partition's next lease")
		}
		pid := it.Ack.PartitionID
		pids[i] = pid
		limits[pid], durations[pid] = it.Next.Limit, it.Next.Duration
		seqs[pid] = it.Ack.ProcessedSeq
	}
	var owned, more []int64
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var rows []struct {
			PartitionID int64 `bun:"partition_id"`
			Top         int64 `bun:"top"`
		}
		if err := r.Query(ctx, tx, s.LockOwned, Args{"pids": s.lockArg(pids), "owner": owner}, &rows); err != nil {
			return err
		}
		owned, more = nil, nil
		// The top read with the rows tells which partitions have more after
		// the ack: it only grows, so "more" is never wrong, and a partition
		// that got more since is found by the next wake-up.
		for _, row := range rows {
			owned = append(owned, row.PartitionID)
			if seqs[row.PartitionID] < row.Top {
				more = append(more, row.PartitionID)
			}
		}
		if len(owned) == 0 {
			return nil
		}
		cases := perPartition(owned, "seq", func(pid int64) int64 { return seqs[pid] })
		if len(more) == 0 {
			_, err := r.Exec(ctx, tx, s.Ack, Args{"cases": cases, "pids": IDs(owned)})
			return err
		}
		_, err := r.Exec(ctx, tx, s.AckLease, Args{"cases": cases, "pids": IDs(owned), "more": IDs(more), "owner": owner,
			"lease_cases": perPartition(more, "lease_us", func(pid int64) int64 { return durations[pid].Microseconds() }),
			"limit_cases": perPartition(more, "limit", func(pid int64) int64 { return int64(limits[pid]) })})
		return err
	})
	if err != nil {
		return nil, err
	}
	taken := make([]groupState, len(more))
	for i, pid := range more {
		// Attempts as read before the lease counted its own, as Lease
		// reports them: the ack had reset them.
		taken[i] = groupState{PartitionID: pid, ProcessedSeq: seqs[pid]}
	}
	leases, err := s.read(ctx, r, taken, limits)
	if err != nil {
		return nil, err
	}
	out := make([]dialect.ProcessorGroupResult, len(p.Items))
	for i, pid := range pids {
		if !slices.Contains(owned, pid) {
			out[i].Err = dialect.ErrLeaseLost
			continue
		}
		out[i].Lease = leases[pid]
	}
	return out, nil
}

type groupRow struct {
	PartitionID int64 `bun:"partition_id"`
	OutgoingRow
}

// read reads the batches of leased partitions in one statement: each the
// seq range after its processed_seq, up to its own limit (seqs are
// gap-free above processed_seq, so "the next n" is (after, after+n]).
func (s *GroupSQL) read(ctx context.Context, r *Runner, taken []groupState, limits map[int64]int) (map[int64]dialect.ProcessorLeaseResult, error) {
	out := make(map[int64]dialect.ProcessorLeaseResult, len(taken))
	if len(taken) == 0 {
		return out, nil
	}
	ranges := make([]dialect.VacuumRange, len(taken))
	largest := 0
	for i, t := range taken {
		ranges[i] = dialect.VacuumRange{PartitionID: t.PartitionID, FromSeq: t.ProcessedSeq, ToSeq: t.ProcessedSeq + int64(limits[t.PartitionID])}
		largest = max(largest, limits[t.PartitionID])
	}
	var rows []groupRow
	if err := r.Query(ctx, r.DB(), s.ReadRanges, s.RangesArgs(ranges, largest), &rows); err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b groupRow) int {
		return cmp.Or(cmp.Compare(a.PartitionID, b.PartitionID), cmp.Compare(a.Seq, b.Seq))
	})
	for _, t := range taken {
		out[t.PartitionID] = dialect.ProcessorLeaseResult{Leased: true,
			State: dialect.ProcessorState{ProcessedSeq: t.ProcessedSeq, Attempts: t.Attempts}}
	}
	for i := range rows {
		res := out[rows[i].PartitionID]
		res.Messages = append(res.Messages, rows[i].Message())
		out[rows[i].PartitionID] = res
	}
	return out, nil
}
