package seqboxotel

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqbox/seqbox/processor"
)

// Attribute keys: the OpenTelemetry messaging conventions, and seqbox's own.
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrPartition     = attribute.Key("messaging.destination.partition.id")
	attrMessageID     = attribute.Key("messaging.message.id")
	attrBatchCount    = attribute.Key("messaging.batch.message_count")
	attrSeq           = attribute.Key("seqbox.seq")
	attrSeqLast       = attribute.Key("seqbox.seq.last")
	attrAttempts      = attribute.Key("seqbox.attempts")
	attrMode          = attribute.Key("seqbox.mode")
	attrOutcome       = attribute.Key("seqbox.outcome")
)

// System is the messaging.system of seqbox's spans.
const System = "seqbox"

// EnqueueHeaders returns the hook for Builder.EnqueueHeaders: the span
// context of the enqueuing call's context, written as headers by the
// propagator (W3C traceparent and tracestate by default). A context
// without a span adds nothing.
func EnqueueHeaders(opts ...Option) func(ctx context.Context, queue string) map[string]string {
	c := newConfig(opts)
	return func(ctx context.Context, _ string) map[string]string {
		carrier := propagation.MapCarrier{}
		c.prop.Inject(ctx, carrier)
		if len(carrier) == 0 {
			return nil
		}
		return carrier
	}
}

// Middleware returns a processor.Middleware that runs every handler call
// in a consumer span ("<queue> process") and records its duration. The
// span links to the span context each message was enqueued with; a call
// of one message is also that span's child, so the trace continues across
// the outbox. The handler's context carries the span: a relay passes it on
// to its broker's headers. An error of the call (a retry or a rejection)
// marks the span as failed.
func Middleware(opts ...Option) processor.Middleware {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	meter := c.mp.Meter(ScopeName)
	duration, err := meter.Float64Histogram("seqbox.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of handler calls, middleware included."))
	if err != nil {
		otelHandle(err)
	}
	return func(ctx context.Context, call *processor.Call, next func(ctx context.Context) error) error {
		msgs := call.Batch.Messages
		attrs := []attribute.KeyValue{
			attrSystem.String(System), attrOperationType.String("process"), attrOperationName.String("process"),
			attrDestination.String(call.Queue), attrPartition.String(strconv.Itoa(call.Partition)),
			attrMode.String(call.Mode.String()),
		}
		switch len(msgs) {
		case 0:
		case 1:
			attrs = append(attrs, attrMessageID.String(msgs[0].ID.String()), attrSeq.Int64(msgs[0].Seq),
				attrAttempts.Int(msgs[0].Attempts))
		default:
			attrs = append(attrs, attrBatchCount.Int(len(msgs)), attrSeq.Int64(msgs[0].Seq),
				attrSeqLast.Int64(msgs[len(msgs)-1].Seq), attrAttempts.Int(msgs[0].Attempts))
		}
		links := make([]trace.Link, 0, len(msgs))
		var parent trace.SpanContext
		for _, m := range msgs {
			sc := trace.SpanContextFromContext(c.prop.Extract(context.Background(), propagation.MapCarrier(m.Headers)))
			if sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
				parent = sc
			}
		}
		spanCtx := ctx
		if len(msgs) == 1 && parent.IsValid() {
			spanCtx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
		spanCtx, span := tracer.Start(spanCtx, call.Queue+" process", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attrs...), trace.WithLinks(links...))
		began := time.Now()
		err := next(spanCtx)
		outcome := "ok"
		if err != nil {
			outcome = "error"
			if errors.Is(err, processor.ErrRejected) {
				outcome = "rejected"
			}
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrOutcome.String(outcome))
		span.End()
		if duration != nil {
			duration.Record(ctx, time.Since(began).Seconds(), metric.WithAttributes(attrDestination.String(call.Queue),
				attrMode.String(call.Mode.String()), attrOutcome.String(outcome)))
		}
		return err
	}
}
