// Package seqboxotel connects seqbox to OpenTelemetry. Trace context
// travels in message headers (W3C traceparent and tracestate) from the span
// that enqueued a message to the consumer span of its delivery, so a trace
// crosses the outbox; the pipeline's counts, handler durations, backlog
// and oldest waiting message are metrics.
//
// Wiring, with the providers of your SDK:
//
//	ob, err := seqbox.New(db).
//		EnqueueHeaders(seqboxotel.EnqueueHeaders()).
//		QueueDefaults(processor.Use(seqboxotel.Middleware(seqboxotel.WithTracerProvider(tp), seqboxotel.WithMeterProvider(mp)))).
//		Queue(...).Start(ctx)
//	reg, err := seqboxotel.RegisterMetrics(ob, seqboxotel.WithMeterProvider(mp))
//
// It is its own Go module, so that an application that does not use
// OpenTelemetry does not depend on it.
package seqboxotel

import (
	"cmp"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span and instrument.
const ScopeName = "github.com/seqbox/seqbox/otel"

// StatsIntervalDefault bounds how often the gauges read Stats.
const StatsIntervalDefault = 10 * time.Second

type config struct {
	tp            trace.TracerProvider
	mp            metric.MeterProvider
	prop          propagation.TextMapPropagator
	statsInterval time.Duration
}

// Option configures the tracing and metrics of this package.
type Option func(*config)

// WithTracerProvider sets the tracer provider; defaults to the global one.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the meter provider; defaults to the global one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithPropagator sets how span context is written to and read from
// message headers; defaults to W3C trace context.
func WithPropagator(p propagation.TextMapPropagator) Option { return func(c *config) { c.prop = p } }

// WithStatsInterval sets the least time between two reads of Stats for
// the backlog gauges, however often metrics are collected (default 10s):
// Stats reads every partition and costs milliseconds.
func WithStatsInterval(d time.Duration) Option { return func(c *config) { c.statsInterval = d } }

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = propagation.TraceContext{}
	}
	c.statsInterval = cmp.Or(c.statsInterval, StatsIntervalDefault)
	return c
}
