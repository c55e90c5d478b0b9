// Counters and Stats: the process's counts and the database's backlog
// figures per partition.

package engine

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
)

// Counters returns the process counters (cheap: no database access).
func (o *Outbox) Counters() outbox.Counters {
	pc := o.procs.Counters()
	return outbox.Counters{
		Enqueued: o.enqueued.Load(), Duplicates: o.duplicates.Load(), Sequenced: o.seq.Sequenced(), Delivered: pc.Delivered,
		Retried: pc.Retried, DeadLettered: pc.DeadLettered, Parked: pc.Parked, Purged: pc.Purged, Vacuumed: o.vac.Deleted(),
		DedupKeysExpired: o.vac.ExpiredKeys(), GenerationsTruncated: o.vac.Truncated(),
	}
}

// Stats reads every partition's backlog and dead letters from the database.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) {
	ps, err := ReadStats(ctx, o.d, 0)
	if err != nil {
		return outbox.Stats{}, err
	}
	return outbox.Stats{Counters: o.Counters(), Partitions: ps, Queues: outbox.QueueTotals(ps)}, nil
}

// ReadStats reads every partition's backlog and dead letters, or one
// partition's when partitionID is not 0, from the database, without a
// running Outbox (seqbox.Stats, the CLI's status).
func ReadStats(ctx context.Context, s dialect.Dialect, partitionID int64) ([]outbox.PartitionStats, error) {
	ps, err := s.PartitionStats(ctx, &dialect.PartitionStatsParams{PartitionID: partitionID})
	if err != nil {
		return nil, err
	}
	dls, err := s.DeadLetterCount(ctx, &dialect.DeadLetterCountParams{PartitionID: partitionID})
	if err != nil {
		return nil, err
	}
	byPartition := map[int64]map[string]int64{}
	for _, d := range dls {
		if byPartition[d.PartitionID] == nil {
			byPartition[d.PartitionID] = map[string]int64{}
		}
		byPartition[d.PartitionID][d.Status] = d.Count
	}
	out := make([]outbox.PartitionStats, len(ps))
	for i, p := range ps {
		out[i] = outbox.PartitionStats{
			Queue: p.Queue, Partition: p.Partition, Incoming: p.Incoming, Unprocessed: p.Sequence - p.ProcessedSeq,
			ProcessedSeq: p.ProcessedSeq, Sequence: p.Sequence, OldestIncoming: p.OldestIncoming,
			OldestUnprocessed: earliest(p.OldestOutgoing, p.OldestIncoming),
			Attempts:          p.Attempts, LastError: p.LastError, NextAttemptAt: p.NextAttemptAt, LockedUntil: p.LockedUntil,
			Parked: !p.ParkedAt.IsZero(), ParkedAt: p.ParkedAt, DeadLetters: byPartition[p.PartitionID],
		}
	}
	return out, nil
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
