package kit

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// StatsSQL is the statements of the read-only views: stats, partitions,
// parked and retrying partitions.
type StatsSQL struct {
	// PartitionStats reads every registered partition's backlog figures
	// (the columns of partitionStatsRow).
	PartitionStats *Stmt
	// DeadLetterCount counts dead letters by partition_id and status: n.
	DeadLetterCount *Stmt
	// PartitionList names every partition (id, queue, partition_no) in
	// queue and partition order; PartitionListQueue those of ?queue.
	PartitionList      *Stmt
	PartitionListQueue *Stmt
	// FailingList reads the partitions that are parked or whose head
	// failed (the columns of adminRow), leased meaning a lease not expired
	// by the database clock.
	FailingList *Stmt
	// AdminRead reads partition ?pid's processor row (adminRow's columns
	// but id, queue, partition_no); AdminLock also row-locks it, waiting.
	AdminRead *Stmt
	AdminLock *Stmt
}

type partitionStatsRow struct {
	ID             int64      `bun:"id"`
	Queue          string     `bun:"queue"`
	PartitionNo    int        `bun:"partition_no"`
	Sequence       int64      `bun:"sequence"`
	ProcessedSeq   int64      `bun:"processed_seq"`
	Attempts       int        `bun:"attempts"`
	LastError      *string    `bun:"last_error"`
	LockedUntil    *time.Time `bun:"locked_until"`
	NextAttemptAt  *time.Time `bun:"next_attempt_at"`
	ParkedAt       *time.Time `bun:"parked_at"`
	Incoming       int64      `bun:"incoming"`
	OldestIncoming *time.Time `bun:"oldest_incoming"`
	OldestOutgoing *time.Time `bun:"oldest_outgoing"`
}

// Partitions reads every partition's backlog figures on conn.
func (s *StatsSQL) Partitions(ctx context.Context, r *Runner, conn bun.IConn, partitionID int64) ([]dialect.PartitionStats, error) {
	var rows []partitionStatsRow
	if err := r.Query(ctx, conn, s.PartitionStats, Args{"pid": partitionID}, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.PartitionStats, len(rows))
	for i, row := range rows {
		st := dialect.PartitionStats{
			PartitionID: row.ID, Queue: row.Queue, Partition: row.PartitionNo, Sequence: row.Sequence,
			ProcessedSeq: row.ProcessedSeq, Attempts: row.Attempts, Incoming: row.Incoming,
		}
		if row.LastError != nil {
			st.LastError = *row.LastError
		}
		if row.LockedUntil != nil {
			st.LockedUntil = *row.LockedUntil
		}
		if row.NextAttemptAt != nil {
			st.NextAttemptAt = *row.NextAttemptAt
		}
		if row.OldestIncoming != nil {
			st.OldestIncoming = *row.OldestIncoming
		}
		if row.OldestOutgoing != nil {
			st.OldestOutgoing = *row.OldestOutgoing
		}
		if row.ParkedAt != nil {
			st.ParkedAt = *row.ParkedAt
		}
		out[i] = st
	}
	return out, nil
}

// DeadLetters counts dead letters by partition and status.
func (s *StatsSQL) DeadLetters(ctx context.Context, r *Runner, partitionID int64) ([]dialect.DeadLetterCount, error) {
	var rows []struct {
		PartitionID int64  `bun:"partition_id"`
		Status      string `bun:"status"`
		Count       int64  `bun:"n"`
	}
	if err := r.Query(ctx, r.DB(), s.DeadLetterCount, Args{"pid": partitionID}, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.DeadLetterCount, len(rows))
	for i, row := range rows {
		out[i] = dialect.DeadLetterCount{PartitionID: row.PartitionID, Status: row.Status, Count: row.Count}
	}
	return out, nil
}

// PartitionNames names the partitions of one queue, or of all.
func (s *StatsSQL) PartitionNames(ctx context.Context, r *Runner, p *dialect.PartitionListParams) ([]dialect.PartitionInfo, error) {
	var rows []struct {
		ID          int64  `bun:"id"`
		Queue       string `bun:"queue"`
		PartitionNo int    `bun:"partition_no"`
	}
	var err error
	if p.Queue == "" {
		err = r.Query(ctx, r.DB(), s.PartitionList, nil, &rows)
	} else {
		err = r.Query(ctx, r.DB(), s.PartitionListQueue, Args{"queue": p.Queue}, &rows)
	}
	if err != nil {
		return nil, err
	}
	out := make([]dialect.PartitionInfo, len(rows))
	for i, row := range rows {
		out[i] = dialect.PartitionInfo{ID: row.ID, Queue: row.Queue, Partition: row.PartitionNo}
	}
	return out, nil
}

// adminRow is a processor row as an operator's action reads it.
type adminRow struct {
	ID            int64      `bun:"id"`
	Queue         string     `bun:"queue"`
	PartitionNo   int        `bun:"partition_no"`
	ProcessedSeq  int64      `bun:"processed_seq"`
	Attempts      int        `bun:"attempts"`
	LastError     *string    `bun:"last_error"`
	NextAttemptAt *time.Time `bun:"next_attempt_at"`
	ParkedAt      *time.Time `bun:"parked_at"`
	Leased        int64      `bun:"leased"`
}

func (r *adminRow) state() dialect.ProcessorAdminState {
	s := dialect.ProcessorAdminState{
		PartitionInfo: dialect.PartitionInfo{ID: r.ID, Queue: r.Queue, Partition: r.PartitionNo},
		ProcessedSeq:  r.ProcessedSeq, Attempts: r.Attempts, Leased: r.Leased != 0,
	}
	if r.LastError != nil {
		s.LastError = *r.LastError
	}
	if r.NextAttemptAt != nil {
		s.NextAttemptAt = *r.NextAttemptAt
	}
	if r.ParkedAt != nil {
		s.ParkedAt = *r.ParkedAt
	}
	return s
}

// Failing lists the parked and retrying partitions.
func (s *StatsSQL) Failing(ctx context.Context, r *Runner) ([]dialect.ProcessorAdminState, error) {
	var rows []adminRow
	if err := r.Query(ctx, r.DB(), s.FailingList, nil, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.ProcessorAdminState, len(rows))
	for i := range rows {
		out[i] = rows[i].state()
	}
	return out, nil
}

// Admin reads (and with p.Lock locks, in p.Conn) one partition's
// processor row.
func (s *StatsSQL) Admin(ctx context.Context, r *Runner, p *dialect.ProcessorAdminReadParams) (dialect.ProcessorAdminReadResult, error) {
	stmt := s.AdminRead
	if p.Lock {
		stmt = s.AdminLock
	}
	var rows []adminRow
	if err := r.Query(ctx, p.Conn, stmt, Args{"pid": p.PartitionID}, &rows); err != nil {
		return dialect.ProcessorAdminReadResult{}, err
	}
	if len(rows) == 0 {
		return dialect.ProcessorAdminReadResult{}, nil
	}
	return dialect.ProcessorAdminReadResult{Found: true, State: rows[0].state()}, nil
}
