package seqboxotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/sqlite"
	seqboxotel "github.com/seqbox/seqbox/otel"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// A request's trace continues into the delivery of the message it
// enqueued: the consumer span is the enqueuing span's child.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-otel") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	spans := tracetest.NewSpanRecorder() // your exporter, in an application
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	ob, err := seqbox.New(db).Migrate(true).
		EnqueueHeaders(seqboxotel.EnqueueHeaders()).
		QueueDefaults(processor.Use(seqboxotel.Middleware(seqboxotel.WithTracerProvider(tp)))).
		Queue("orders", 4, processor.Leased(func(ctx context.Context, d processor.Delivery) error { return nil })).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	reqCtx, request := tp.Tracer("app").Start(ctx, "POST /orders")
	id, _ := ob.Enqueue(reqCtx, db, "orders", outbox.Message{Key: "customer-7", PayloadType: "order.created.v1"})
	request.End()
	_ = ob.WaitProcessed(ctx, id)
	for _, s := range spans.Ended() {
		if s.Name() == "orders process" {
			fmt.Println(s.Name(), s.SpanKind(), "same trace:", s.SpanContext().TraceID() == request.SpanContext().TraceID(),
				"parent is the request:", s.Parent().SpanID() == request.SpanContext().SpanID())
		}
	}
	// Output:
	// orders process consumer same trace: true parent is the request: true
}
