package seqbox

import (
	"context"
	"slices"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
)

// Admin is the operator's view of an outbox's tables: state, dead
// letters, parked and retrying partitions, purge, schema. It needs no
// running pipeline: a CLI, an admin service or a web UI opens one with
// NewAdmin; an application with a running Outbox uses Outbox.Admin.
type Admin struct {
	d dialect.Dialect
	// dirty and resumed, set by Outbox.Admin, tell the local pipeline of
	// replayed messages and resumed partitions; nil otherwise (other
	// processes find them at their next poll).
	dirty   func(partitionIDs []int64)
	resumed func(partitionID int64)
}

// NewAdmin returns the Admin of the seqbox tables with prefix ("" for
// DefaultPrefix) on db. On MySQL/MariaDB it reads the server's version
// first, and fails at once, saying so, when the server is unreachable.
func NewAdmin(ctx context.Context, db *bun.DB, prefix string) (*Admin, error) {
	d, err := dialects.Open(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return &Admin{d: d}, nil
}

// DeadLetters returns the dead-letter actions.
func (a *Admin) DeadLetters() *DeadLetters { return &DeadLetters{s: a.d, replayed: a.dirty} }

// Partitions returns the partition actions: list parked (and retrying)
// partitions, resume, skip.
func (a *Admin) Partitions() *Partitions { return &Partitions{s: a.d, resumed: a.resumed} }

// Stats reads every partition's backlog, failing heads and dead letters.
// Its Counters are zero: they belong to a running process
// (Outbox.Stats).
func (a *Admin) Stats(ctx context.Context) (outbox.Stats, error) {
	ps, err := engine.ReadStats(ctx, a.d, 0)
	if err != nil {
		return outbox.Stats{}, err
	}
	return outbox.Stats{Partitions: ps, Queues: outbox.QueueTotals(ps)}, nil
}

// PartitionStats reads one partition's backlog, failing head and dead
// letters, reading only that partition's rows. It returns a
// *PartitionError with ErrUnknownPartition for a partition the queue does
// not have.
func (a *Admin) PartitionStats(ctx context.Context, queue string, partition int) (outbox.PartitionStats, error) {
	parts := a.Partitions()
	pid, err := parts.partitionID(ctx, queue, partition, "read")
	if err != nil {
		return outbox.PartitionStats{}, err
	}
	ps, err := engine.ReadStats(ctx, a.d, pid)
	if err != nil {
		return outbox.PartitionStats{}, err
	}
	if len(ps) != 1 {
		return outbox.PartitionStats{}, &PartitionError{Queue: queue, Partition: partition, Action: "read", Err: ErrUnknownPartition}
	}
	return ps[0], nil
}

// QueueInfo is a registered queue.
type QueueInfo struct {
	Name       string
	Partitions int
}

// Queues lists the registered queues, by name.
func (a *Admin) Queues(ctx context.Context) ([]QueueInfo, error) {
	parts, err := a.d.PartitionList(ctx, &dialect.PartitionListParams{})
	if err != nil {
		return nil, dialect.Wrap(err, "list queues")
	}
	count := map[string]int{}
	for _, p := range parts {
		count[p.Queue]++
	}
	out := make([]QueueInfo, 0, len(count))
	for q, n := range count {
		out = append(out, QueueInfo{Name: q, Partitions: n})
	}
	slices.SortFunc(out, func(x, y QueueInfo) int { return cmpString(x.Name, y.Name) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Purge removes queue's messages not yet delivered whose headers all match
// f, while the pipeline runs (docs/ARCHITECTURE.md, "Purge"): unsequenced
// ones are deleted; sequenced ones become tombstones that the processors
// pass over without a handler call, so seqs stay gap-free. A message being
// delivered when the purge reaches it is left to that delivery, and Purge
// waits for it: each matching message is purged or delivered, never both.
// Dead letters are not touched.
func (a *Admin) Purge(ctx context.Context, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	return engine.Purge(ctx, a.d, queue, f)
}

// PreviewPurge counts what Purge would remove now, changing nothing.
func (a *Admin) PreviewPurge(ctx context.Context, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	return engine.PreviewPurge(ctx, a.d, queue, f)
}

// SchemaStatus is the schema's version in the database.
type SchemaStatus struct {
	// Version is the last migration applied (0: no schema); Latest is the
	// newest this build of seqbox knows.
	Version, Latest int
}

// Migrate creates or upgrades the schema, under a database lock
// (idempotent; what Builder.Migrate(true) does in Start).
func (a *Admin) Migrate(ctx context.Context) error {
	return a.d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{})
}

// SchemaStatus reads the schema's version, changing nothing.
func (a *Admin) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	st, err := a.d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	if err != nil {
		return SchemaStatus{}, err
	}
	return SchemaStatus{Version: st.Current, Latest: st.Latest}, nil
}
