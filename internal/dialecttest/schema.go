package dialecttest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// testBase: the dialect's properties and its transaction discipline.
func testBase(t *testing.T, open Open) {
	e := newEnv(t, open)
	t.Run("Properties", func(t *testing.T) {
		d := e.d
		require.NotEqual(t, dialect.Invalid, d.Name())
		require.NotEqual(t, "invalid", d.Name().String())
		// One writer or row locks shared by processes, never both.
		require.NotEqual(t, d.Features().Has(dialect.MultiProcess), d.Features().Has(dialect.SingleWriter))
		tb, err := dialect.NewTables(e.prefix)
		require.NoError(t, err)
		require.Equal(t, tb, d.Tables())
		require.Positive(t, d.Limits().MaxPayloadBytes)
		require.Greater(t, d.Limits().MaxStatementBytes, d.Limits().MaxPayloadBytes)
		require.Positive(t, d.Tuning().SequencerWorkers)
		require.Positive(t, d.Tuning().VacuumWorkers)
		require.NotNil(t, d.DB())
		_ = d.TxOptions() // nil or the outbox's options: either is valid
		unlock := d.LockWriter()
		require.NotNil(t, unlock)
		unlock()
	})
	t.Run("Errors", func(t *testing.T) {
		require.True(t, e.d.IsRetryable(dialect.ErrRetryable))
		require.True(t, e.d.IsRetryable(dialect.Wrap(dialect.ErrRetryable, "op")))
		require.True(t, e.d.IsTransient(dialect.ErrRetryable))
		require.False(t, e.d.IsRetryable(errors.New("no")))
		require.False(t, e.d.IsTransient(errors.New("no")))
		require.False(t, e.d.IsRetryable(dialect.ErrLeaseLost))
	})
	t.Run("SchemaStatements", func(t *testing.T) {
		stmts := e.d.SchemaStatements()
		require.NotEmpty(t, stmts)
		all := strings.Join(stmts, "\n")
		for _, table := range e.tb.All() {
			require.Contains(t, all, table, "the DDL creates %s", table)
		}
		require.NotContains(t, all, "{", "every {word} is expanded")
	})
	t.Run("RunInTx", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		boom := errors.New("boom")
		err := e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			require.NoError(t, e.d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows(pid, 2), ChunkRows: 10, ChunkBytes: 1 << 20}))
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Zero(t, e.incoming(pid), "rolled back")
		require.Zero(t, e.count(e.tb.Body, ""))
		require.NoError(t, e.d.RunInTx(e.ctx, func(ctx context.Context, tx bun.Tx) error {
			return e.d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{Conn: tx, Rows: rows(pid, 2), ChunkRows: 10, ChunkBytes: 1 << 20})
		}))
		require.Equal(t, 2, e.incoming(pid), "committed")
	})
	t.Run("PrepareRelease", func(t *testing.T) {
		e := e.with(t)
		pid := e.queue(1)[0]
		e.sequenced(3, pid)
		require.NoError(t, e.d.Prepare(e.ctx))
		require.NoError(t, e.d.Prepare(e.ctx), "twice")
		require.True(t, e.lease(pid, "a", 1).Leased)
		require.NoError(t, e.d.Release())
		require.NoError(t, e.d.Release(), "twice")
		// Still usable after Release: what it needs is prepared again.
		require.NoError(t, e.d.ProcessorAck(e.ctx, dialect.ProcessorAdvance(pid, "a", 1, nil)))
		res := e.lease(pid, "a", 5)
		require.True(t, res.Leased)
		require.Equal(t, []int64{2, 3}, seqsOf(res.Messages))
		require.NoError(t, e.d.Release())
	})
}

// testSchema: status, migrate (idempotent, keeping data), drop.
func testSchema(t *testing.T, open Open) {
	ctx := context.Background()
	prefix := freshPrefix()
	d := open(t, prefix)
	t.Cleanup(func() {
		_ = d.Release()
		_ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{})
	})

	st, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Zero(t, st.Current, "no table yet")
	require.Positive(t, st.Latest)

	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st2, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, dialect.SchemaStatus{Current: st.Latest, Latest: st.Latest}, st2)

	ids, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "kept", Partitions: 2}}})
	require.NoError(t, err)

	// Idempotent, by this handle and by another (another process's start).
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	other := open(t, prefix)
	t.Cleanup(func() { _ = other.Release() })
	require.NoError(t, other.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	st3, err := other.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st2, st3)
	var versions int
	require.NoError(t, d.DB().NewRaw("SELECT COUNT(*) FROM ?", bun.Ident(d.Tables().SchemaVersion)).Scan(ctx, &versions))
	require.Equal(t, st.Latest, versions, "each version recorded once")
	again, err := d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "kept", Partitions: 2}}})
	require.NoError(t, err)
	require.Equal(t, ids, again, "a migration keeps the data")

	require.NoError(t, d.SchemaDrop(ctx, &dialect.SchemaDropParams{}))
	st4, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Zero(t, st4.Current, "dropped")
	require.NoError(t, d.SchemaDrop(ctx, &dialect.SchemaDropParams{}), "dropping nothing")
	require.NoError(t, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}), "migrate after a drop")
	st5, err := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	require.NoError(t, err)
	require.Equal(t, st2, st5)
}

// testQueueRegister: rows created once, ids in the order asked, all or
// none, count mismatch.
func testQueueRegister(t *testing.T, open Open) {
	e := newEnv(t, open)
	reg := func(qs ...dialect.QueueDef) ([][]int64, error) {
		return e.d.QueueRegister(e.ctx, &dialect.QueueRegisterParams{Queues: qs})
	}
	t.Run("Empty", func(t *testing.T) {
		e := e.with(t)
		e.unchanged("registering no queue", func() {
			ids, err := reg()
			require.NoError(t, err)
			require.Empty(t, ids)
		})
	})
	t.Run("Several", func(t *testing.T) {
		e := e.with(t)
		ids, err := reg(dialect.QueueDef{Queue: "zeta", Partitions: 3}, dialect.QueueDef{Queue: "alpha", Partitions: 1})
		require.NoError(t, err)
		require.Len(t, ids, 2)
		require.Len(t, ids[0], 3, "in the order given, not by name")
		require.Len(t, ids[1], 1)
		for part, pid := range ids[0] {
			var got struct {
				Queue string `bun:"queue"`
				No    int    `bun:"partition_no"`
			}
			require.NoError(t, e.db.NewRaw("SELECT queue, partition_no FROM ? WHERE id = ?", bun.Ident(e.tb.Partitions), pid).Scan(e.ctx, &got))
			require.Equal(t, "zeta", got.Queue)
			require.Equal(t, part, got.No, "ids by partition number")
			p := e.proc(pid)
			require.Zero(t, p.ProcessedSeq)
			require.Zero(t, p.Attempts)
			require.Empty(t, p.owner())
			require.Equal(t, 1, e.count(e.tb.VacuumCounter, "partition_id = ?", pid))
		}
		e.unchanged("registering again", func() {
			again, err := reg(dialect.QueueDef{Queue: "alpha", Partitions: 1}, dialect.QueueDef{Queue: "zeta", Partitions: 3})
			require.NoError(t, err)
			require.Equal(t, [][]int64{ids[1], ids[0]}, again)
		})
	})
	t.Run("CountMismatch", func(t *testing.T) {
		e := e.with(t)
		_, err := reg(dialect.QueueDef{Queue: "fixed", Partitions: 2})
		require.NoError(t, err)
		e.unchanged("a mismatched registration", func() {
			_, err := reg(dialect.QueueDef{Queue: "newcomer", Partitions: 2}, dialect.QueueDef{Queue: "fixed", Partitions: 4})
			var pce *dialect.PartitionCountError
			require.ErrorAs(t, err, &pce)
			require.ErrorIs(t, err, dialect.ErrPartitionCountMismatch)
			require.Equal(t, "fixed", pce.Queue)
			require.Equal(t, 2, pce.Registered)
			require.Equal(t, 4, pce.Requested)
		})
		require.Zero(t, e.count(e.tb.Partitions, "queue = ?", "newcomer"), "all or none")
		_, err = reg(dialect.QueueDef{Queue: "fixed", Partitions: 1})
		var pce *dialect.PartitionCountError
		require.ErrorAs(t, err, &pce, "fewer is a mismatch too")
	})
}

// testPartitionList: every queue's partitions, or one queue's.
func testPartitionList(t *testing.T, open Open) {
	e := newEnv(t, open)
	list := func(queue string) []dialect.PartitionInfo {
		out, err := e.d.PartitionList(e.ctx, &dialect.PartitionListParams{Queue: queue})
		require.NoError(t, err)
		return out
	}
	require.Empty(t, list(""), "no queue yet")
	ids, err := e.d.QueueRegister(e.ctx, &dialect.QueueRegisterParams{Queues: []dialect.QueueDef{{Queue: "b", Partitions: 2}, {Queue: "a", Partitions: 1}}})
	require.NoError(t, err)
	b := []dialect.PartitionInfo{{ID: ids[0][0], Queue: "b", Partition: 0}, {ID: ids[0][1], Queue: "b", Partition: 1}}
	a := []dialect.PartitionInfo{{ID: ids[1][0], Queue: "a", Partition: 0}}
	require.Equal(t, append(a, b...), list(""), "by queue, then partition")
	require.Equal(t, b, list("b"))
	require.Empty(t, list("nosuch"))
}
