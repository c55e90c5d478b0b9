package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/outbox"
)

// errorTextTarget is one database with a partition whose head can be
// leased again and again.
type errorTextTarget struct {
	name string
	db   *bun.DB
	d    dialect.Dialect
	pid  int64
	msg  dialect.OutgoingMessage
}

// FuzzErrorTextStored feeds arbitrary bytes as a handler's error text
// through the statements that record a failure (the lease-guarded ack, and
// the transaction that writes dead letters) on every database: each must
// store it, as dialect.ErrorText renders it, and never refuse it. Run with
// go test ./internal/conformance -run '^$' -fuzz FuzzErrorTextStored.
func FuzzErrorTextStored(f *testing.F) {
	for _, s := range []string{"", "boom", hostileErrorText, "\x00", "\xff\xfe\xfd", "'; DROP TABLE x; --", "🙂\u2028"} {
		f.Add(s)
	}
	ctx := context.Background()
	var targets []errorTextTarget
	for _, o := range dbtest.All() {
		targets = append(targets, newErrorTextTarget(ctx, f, o.Name, o.Open(f)))
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, tg := range targets {
			tg.check(ctx, t, text)
		}
	})
}

func newErrorTextTarget(ctx context.Context, f *testing.F, name string, db *bun.DB) errorTextTarget {
	prefix := dbtest.Prefix(f)
	d, err := dialects.Open(context.Background(), db, prefix)
	require.NoError(f, err)
	require.NoError(f, d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{}))
	f.Cleanup(func() { _ = d.SchemaDrop(context.Background(), &dialect.SchemaDropParams{}) })
	ob, err := StartOutbox(ctx, seqbox.New(db).TablePrefix(prefix).ProducerOnly().Queue("q", 1, nil))
	require.NoError(f, err)
	_, err = ob.Enqueue(ctx, db, "q", outbox.Message{PayloadType: "t", Payload: []byte("p")})
	require.NoError(f, err)
	require.NoError(f, ob.Stop(ctx))
	pid := ob.PartitionIDs("q")[0]
	res, err := d.SequenceMove(ctx, &dialect.SequenceMoveParams{PartitionID: pid, Limit: 10})
	require.NoError(f, err)
	require.Equal(f, 1, res.Moved)
	tg := errorTextTarget{name: name, db: db, d: d, pid: pid}
	lease := tg.lease(ctx, f)
	tg.msg = lease.Messages[0]
	require.NoError(f, d.ProcessorAck(ctx, dialect.ProcessorFailure(pid, "fuzz", 0, 0, "", 0, nil)))
	return tg
}

func (tg errorTextTarget) lease(ctx context.Context, t testing.TB) dialect.ProcessorLeaseResult {
	res, err := tg.d.ProcessorLease(ctx, &dialect.ProcessorLeaseParams{PartitionID: tg.pid, Owner: "fuzz", Duration: time.Minute, Limit: 1})
	require.NoError(t, err, tg.name)
	require.True(t, res.Leased, "%s: the head must be leasable", tg.name)
	return res
}

func (tg errorTextTarget) check(ctx context.Context, t *testing.T, text string) {
	want := dialect.ErrorText(text)
	// The lease-guarded failure record (a single statement on PostgreSQL).
	tg.lease(ctx, t)
	require.NoError(t, tg.d.ProcessorAck(ctx, dialect.ProcessorFailure(tg.pid, "fuzz", 0, 1, text, 0, nil)), "%s: %q", tg.name, text)
	var stored *string
	require.NoError(t, tg.db.NewRaw("SELECT last_error FROM ? WHERE partition_id = ?",
		bun.Ident(tg.d.Tables().Processor), tg.pid).Scan(ctx, &stored))
	if want == "" {
		require.Nil(t, stored, tg.name)
	} else {
		require.NotNil(t, stored, tg.name)
		require.Equal(t, want, *stored, "%s: %q", tg.name, text)
	}
	// A dead letter carrying the text, in the same transaction as the record.
	dl := dialect.DeadLetter{PartitionID: tg.pid, Seq: tg.msg.Seq, MessageID: tg.msg.ID, PayloadType: tg.msg.PayloadType,
		Payload: tg.msg.Payload, CreatedAt: tg.msg.CreatedAt, LastError: text, Attempts: 1}
	tg.lease(ctx, t)
	require.NoError(t, tg.d.ProcessorAck(ctx, dialect.ProcessorFailure(tg.pid, "fuzz", 0, 0, "", 0, []dialect.DeadLetter{dl})),
		"%s: %q", tg.name, text)
	var dlText string
	require.NoError(t, tg.db.NewRaw("SELECT COALESCE(last_error, '') FROM ? ORDER BY id DESC LIMIT 1",
		bun.Ident(tg.d.Tables().DeadLetters)).Scan(ctx, &dlText))
	require.Equal(t, want, dlText, "%s: %q", tg.name, text)
}
