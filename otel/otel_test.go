package seqboxotel_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/sqlite"
	seqboxotel "github.com/seqbox/seqbox/otel"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

func openDB(t *testing.T) *bun.DB {
	t.Helper()
	sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(t.TempDir(), "otel.db")))
	require.NoError(t, err)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// attrs indexes a span's attributes.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestTraceCrossesTheOutbox: the span that enqueues a message is the parent
// of the consumer span of its delivery (one trace), with the messaging
// attributes; a batch call links to each message's producer span; a failed
// call is an error span; the handler's context carries the consumer span.
// With the real SDK's span recorder and a real (SQLite) outbox.
func TestTraceCrossesTheOutbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := openDB(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tracer := tp.Tracer("app")

	// Producer-only first: the three "batch" messages wait, so that the
	// consumer's batch handler gets them in one call.
	prod, err := seqbox.New(db).Migrate(true).ProducerOnly().EnqueueHeaders(seqboxotel.EnqueueHeaders()).
		Queue("orders", 1, nil).Queue("audit", 1, nil).Start(ctx)
	require.NoError(t, err)
	var producerSpans []trace.SpanContext
	var ids []outbox.MessageID
	for range 3 {
		sctx, span := tracer.Start(ctx, "checkout")
		id, err := prod.Enqueue(sctx, db, "audit", outbox.Message{PayloadType: "audit.v1"})
		require.NoError(t, err)
		span.End()
		producerSpans, ids = append(producerSpans, span.SpanContext()), append(ids, id)
	}
	require.NoError(t, prod.Stop(ctx))

	handlerSpans := make(chan trace.SpanContext, 10)
	failOnce := true
	mw := seqboxotel.Middleware(seqboxotel.WithTracerProvider(tp), seqboxotel.WithMeterProvider(mp))
	ob, err := seqbox.New(db).EnqueueHeaders(seqboxotel.EnqueueHeaders()).QueueDefaults(processor.Use(mw)).
		Queue("orders", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			if failOnce {
				failOnce = false
				return context.DeadlineExceeded
			}
			handlerSpans <- trace.SpanContextFromContext(ctx)
			return nil
		}), processor.Retry(time.Millisecond, 2*time.Millisecond)).
		Queue("audit", 1, processor.LeasedBatch(func(ctx context.Context, b *processor.Batch) error { return nil }), processor.BatchSize(10)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	reg, err := seqboxotel.RegisterMetrics(ob, seqboxotel.WithMeterProvider(mp), seqboxotel.WithStatsInterval(time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, reg.Unregister()) }()

	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	sctx, checkout := tracer.Start(ctx, "place order")
	id, err := ob.Enqueue(sctx, db, "orders", outbox.Message{PayloadType: "order.v1", Key: "c-1"})
	require.NoError(t, err)
	checkout.End()
	require.NoError(t, ob.WaitProcessed(ctx, id))
	handlerSpan := <-handlerSpans

	var orders, audit []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "orders process":
			orders = append(orders, s)
		case "audit process":
			audit = append(audit, s)
		}
	}
	require.Len(t, orders, 2, "the failed call and the retry")
	failedCall, okCall := orders[0], orders[1]
	for _, s := range orders {
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		require.Equal(t, checkout.SpanContext().TraceID(), s.SpanContext().TraceID(), "one trace across the outbox")
		require.Equal(t, checkout.SpanContext().SpanID(), s.Parent().SpanID())
		a := attrs(s.Attributes())
		require.Equal(t, "seqbox", a["messaging.system"].AsString())
		require.Equal(t, "orders", a["messaging.destination.name"].AsString())
		require.Equal(t, "0", a["messaging.destination.partition.id"].AsString())
		require.Equal(t, id.String(), a["messaging.message.id"].AsString())
		require.Equal(t, int64(1), a["seqbox.seq"].AsInt64())
		require.Len(t, s.Links(), 1)
	}
	require.Equal(t, "Error", failedCall.Status().Code.String())
	require.Equal(t, "error", attrs(failedCall.Attributes())["seqbox.outcome"].AsString())
	require.Equal(t, "ok", attrs(okCall.Attributes())["seqbox.outcome"].AsString())
	require.Equal(t, okCall.SpanContext().SpanID(), handlerSpan.SpanID(), "the handler runs in the consumer span")

	require.Len(t, audit, 1, "one call for the batch")
	require.Equal(t, int64(3), attrs(audit[0].Attributes())["messaging.batch.message_count"].AsInt64())
	var linked, produced []trace.SpanID
	for _, l := range audit[0].Links() {
		linked = append(linked, l.SpanContext.SpanID())
	}
	for _, sc := range producerSpans {
		produced = append(produced, sc.SpanID())
	}
	require.ElementsMatch(t, produced, linked, "a batch links to each producer span")

	got := map[string]metricdata.Aggregation{}
	collect := func() {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				got[m.Name] = m.Data
			}
		}
	}
	sum := func(name string) int64 {
		t.Helper()
		s, ok := got[name].(metricdata.Sum[int64])
		require.True(t, ok, "%s: %T", name, got[name])
		var n int64
		for _, dp := range s.DataPoints {
			n += dp.Value
		}
		return n
	}
	// The counters move just after the ack WaitProcessed saw.
	require.Eventually(t, func() bool { collect(); return sum("seqbox.messages.delivered") == 4 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(4), sum("seqbox.messages.delivered"))
	require.Equal(t, int64(1), sum("seqbox.messages.enqueued"), "this process enqueued one")
	require.Equal(t, int64(1), sum("seqbox.handler.retries"))
	hist, ok := got["seqbox.handler.duration"].(metricdata.Histogram[float64])
	require.True(t, ok)
	var calls uint64
	for _, dp := range hist.DataPoints {
		calls += dp.Count
	}
	require.Equal(t, uint64(3), calls, "two orders calls and one audit call")
	backlog, ok := got["seqbox.queue.backlog"].(metricdata.Gauge[int64])
	require.True(t, ok)
	require.Len(t, backlog.DataPoints, 2, "one per queue")
	for _, dp := range backlog.DataPoints {
		require.Zero(t, dp.Value)
	}
	_, ok = got["seqbox.queue.oldest_age"].(metricdata.Gauge[float64])
	require.True(t, ok)
}

// A context without a span adds no header.
func TestEnqueueHeadersWithoutSpan(t *testing.T) {
	require.Nil(t, seqboxotel.EnqueueHeaders()(context.Background(), "q"))
}
