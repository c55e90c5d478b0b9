package seqboxotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seqbox/seqbox/outbox"
)

func otelHandle(err error) { otel.Handle(err) }

// Observed is what RegisterMetrics reads: an *outbox.Outbox has it.
type Observed interface {
	Counters() outbox.Counters
	Stats(ctx context.Context) (outbox.Stats, error)
}

// RegisterMetrics registers instruments that read ob when metrics are
// collected: the process's counters (seqbox.messages.enqueued, .duplicates,
// .delivered, .dead_lettered, .purged, seqbox.handler.retries) and, per
// queue, seqbox.queue.backlog (messages not yet acked, sequenced or not),
// seqbox.queue.oldest_age (seconds since the oldest of them was enqueued),
// seqbox.queue.parked_partitions and seqbox.queue.dead_letters (pending).
// The queue gauges come from ob.Stats, read at most once per
// WithStatsInterval whatever the collection rate; a failed read keeps the
// last figures. Unregister the returned registration when ob stops.
func RegisterMetrics(ob Observed, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	meter := c.mp.Meter(ScopeName)
	counter := func(name, desc string) metric.Int64ObservableCounter {
		inst, err := meter.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit("{message}"))
		if err != nil {
			otelHandle(err)
		}
		return inst
	}
	enqueued := counter("seqbox.messages.enqueued", "Messages written by this process's enqueues.")
	duplicates := counter("seqbox.messages.duplicates", "Messages not written: their dedup key was taken.")
	delivered := counter("seqbox.messages.delivered", "Messages acked by this process's handlers.")
	deadLettered := counter("seqbox.messages.dead_lettered", "Messages this process sent to dead letters.")
	purged := counter("seqbox.messages.purged", "Purged messages this process's processors passed over.")
	retries, err := meter.Int64ObservableCounter("seqbox.handler.retries", metric.WithUnit("{call}"),
		metric.WithDescription("Failed handler calls that will be retried."))
	if err != nil {
		return nil, err
	}
	backlog, err := meter.Int64ObservableGauge("seqbox.queue.backlog", metric.WithUnit("{message}"),
		metric.WithDescription("Messages not yet acked, sequenced or not."))
	if err != nil {
		return nil, err
	}
	oldest, err := meter.Float64ObservableGauge("seqbox.queue.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest message not yet acked."))
	if err != nil {
		return nil, err
	}
	parked, err := meter.Int64ObservableGauge("seqbox.queue.parked_partitions", metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions stopped at a failing head (the Park policy)."))
	if err != nil {
		return nil, err
	}
	dead, err := meter.Int64ObservableGauge("seqbox.queue.dead_letters", metric.WithUnit("{message}"),
		metric.WithDescription("Dead letters pending an operator."))
	if err != nil {
		return nil, err
	}
	stats := &statsCache{ob: ob, every: c.statsInterval}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		n := ob.Counters()
		o.ObserveInt64(enqueued, n.Enqueued)
		o.ObserveInt64(duplicates, n.Duplicates)
		o.ObserveInt64(delivered, n.Delivered)
		o.ObserveInt64(deadLettered, n.DeadLettered)
		o.ObserveInt64(purged, n.Purged)
		o.ObserveInt64(retries, n.Retried)
		now := time.Now()
		for _, q := range stats.queues(ctx, now) {
			at := metric.WithAttributes(attribute.String("messaging.destination.name", q.Queue))
			o.ObserveInt64(backlog, q.Incoming+q.Unprocessed, at)
			age := 0.0
			if !q.OldestUnprocessed.IsZero() {
				age = max(0, now.Sub(q.OldestUnprocessed).Seconds())
			}
			o.ObserveFloat64(oldest, age, at)
			o.ObserveInt64(parked, int64(q.Parked), at)
			o.ObserveInt64(dead, q.DeadLetters["pending"], at)
		}
		return nil
	}, enqueued, duplicates, delivered, deadLettered, purged, retries, backlog, oldest, parked, dead)
}

// statsCache reads Stats at most once per interval.
type statsCache struct {
	ob    Observed
	every time.Duration

	mu   sync.Mutex
	at   time.Time
	last []outbox.QueueStats
}

func (s *statsCache) queues(ctx context.Context, now time.Time) []outbox.QueueStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && now.Sub(s.at) < s.every {
		return s.last
	}
	s.at = now // a failing read is not retried at every collection either
	st, err := s.ob.Stats(ctx)
	if err != nil {
		otelHandle(err)
		return s.last
	}
	s.last = st.Queues
	return s.last
}
