package kit

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// RegisterSQL is the statements of QueueRegister.
type RegisterSQL struct {
	// PartitionRows reads queue ?queue's partitions: id, partition_no, in
	// partition order.
	PartitionRows *Stmt
	// InsertPartitions inserts ?rows (?queue, ?no), skipping existing ones.
	InsertPartitions *Stmt
	// InsertProcessors and InsertVacuumCounters insert ?rows (?pid),
	// skipping existing ones.
	InsertProcessors     *Stmt
	InsertVacuumCounters *Stmt
	// InsertStops, where set, gives queue ?queue's new partitions their
	// incoming stops (MariaDB; migration 012 there), skipping existing
	// ones.
	InsertStops *Stmt `kit:"optional"`
}

type partitionRow struct {
	ID          int64 `bun:"id"`
	PartitionNo int   `bun:"partition_no"`
}

// Register creates the queues' rows if missing, all in one transaction;
// see dialect.Dialect.
func (s *RegisterSQL) Register(ctx context.Context, r *Runner, p *dialect.QueueRegisterParams) ([][]int64, error) {
	// Rows are locked in name order, so processes registering overlapping
	// sets of queues never wait on each other in a cycle.
	order := make([]int, len(p.Queues))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p.Queues[order[a]].Queue < p.Queues[order[b]].Queue })
	var out [][]int64
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = make([][]int64, len(p.Queues))
		for _, i := range order {
			ids, err := s.queue(ctx, r, tx, p.Queues[i])
			if err != nil {
				return err
			}
			out[i] = ids
		}
		return nil
	})
	if err != nil {
		var pce *dialect.PartitionCountError
		if errors.As(err, &pce) {
			return nil, pce
		}
		return nil, dialect.Wrap(err, "register queues")
	}
	return out, nil
}

func (s *RegisterSQL) queue(ctx context.Context, r *Runner, tx bun.Tx, q dialect.QueueDef) ([]int64, error) {
	var rows []partitionRow
	if err := r.Query(ctx, tx, s.PartitionRows, Args{"queue": q.Queue}, &rows); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		// Rows in partition order: two registrations racing conflict on
		// partition 0 first, so the later one waits and then sees the count.
		items := make([]Args, q.Partitions)
		for i := range items {
			items[i] = Args{"queue": q.Queue, "no": i}
		}
		n, err := r.Affected(ctx, tx, s.InsertPartitions, Args{"rows": items})
		if err != nil {
			return nil, err
		}
		// Some rows but not all inserted: a concurrent registration with a
		// smaller count got there first. Rolling back removes our extras.
		if n > 0 && n < int64(q.Partitions) {
			return nil, &dialect.PartitionCountError{Queue: q.Queue, Registered: q.Partitions - int(n), Requested: q.Partitions}
		}
		if err := r.Query(ctx, tx, s.PartitionRows, Args{"queue": q.Queue}, &rows); err != nil {
			return nil, err
		}
		if n > 0 && s.InsertStops != nil {
			if _, err := r.Exec(ctx, tx, s.InsertStops, Args{"queue": q.Queue}); err != nil {
				return nil, err
			}
		}
	}
	if len(rows) != q.Partitions {
		return nil, &dialect.PartitionCountError{Queue: q.Queue, Registered: len(rows), Requested: q.Partitions}
	}
	ids := make([]int64, len(rows))
	items := make([]Args, len(rows))
	for i, row := range rows {
		if row.PartitionNo != i {
			return nil, fmt.Errorf("queue %q has a hole at partition %d", q.Queue, i)
		}
		ids[i] = row.ID
		items[i] = Args{"pid": row.ID}
	}
	for _, stmt := range []*Stmt{s.InsertProcessors, s.InsertVacuumCounters} {
		if _, err := r.Exec(ctx, tx, stmt, Args{"rows": items}); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
