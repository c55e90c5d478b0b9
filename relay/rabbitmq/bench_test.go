package rabbitmqrelay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
)

// BenchmarkRelay measures, in one run, the relay draining a backlog of
// relayMessages from an embedded (SQLite) outbox into a broker queue, the
// same drain with a handler that does nothing, and a plain loop publishing
// the same messages with the same client (one confirm channel, every
// confirmation awaited): relay_msgs/s, plain_msgs/s, relay/plain and
// relay/noop_handler (the outbox's own share of the cost).
func BenchmarkRelay(b *testing.B) {
	const relayMessages = 20000
	ctx, conn, db, name := setup(b)
	declare(b, conn, name)
	route := func(processor.Delivery) string { return name }
	msgs := make([]outbox.Message, relayMessages)
	for i := range msgs {
		msgs[i] = outbox.Message{Key: "k" + strconv.Itoa(i%64), PayloadType: "t", Payload: make([]byte, 256)}
	}
	drainWith := func(queue string, h *processor.Handler) time.Duration {
		prod, err := seqbox.New(db).Migrate(true).ProducerOnly().Queue(queue, 16, nil).Start(ctx)
		require.NoError(b, err)
		ids, err := prod.EnqueueBatch(ctx, db, queue, msgs)
		require.NoError(b, err)
		require.NoError(b, prod.Stop(ctx))
		began := time.Now()
		ob, err := seqbox.New(db).Queue(queue, 16, h, processor.BatchSize(1000)).Start(ctx)
		require.NoError(b, err)
		require.NoError(b, ob.WaitProcessed(ctx, ids...))
		took := time.Since(began)
		require.NoError(b, ob.Stop(ctx))
		return took
	}
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: route, Transient: true})
		require.NoError(b, err)
		relayTime += drainWith("q"+strconv.Itoa(i), h)
		noopTime += drainWith("noop"+strconv.Itoa(i), processor.LeasedBatch(func(context.Context, *processor.Batch) error { return nil }))

		ch, err := conn.Channel()
		require.NoError(b, err)
		require.NoError(b, ch.Confirm(false))
		began := time.Now()
		confirms := make([]*amqp.DeferredConfirmation, len(msgs))
		for j, m := range msgs {
			d := processor.Delivery{ID: outbox.MessageID{byte(i), byte(j >> 8), byte(j), 1}, Queue: "q", Key: m.Key,
				Seq: int64(j + 1), PayloadType: m.PayloadType, Payload: m.Payload}
			confirms[j], err = ch.PublishWithDeferredConfirmWithContext(ctx, "", name, true, false, rabbitmqrelay.Publishing(d, true))
			require.NoError(b, err)
		}
		for _, c := range confirms {
			ok, err := c.WaitContext(ctx)
			require.NoError(b, err)
			require.True(b, ok)
		}
		plainTime += time.Since(began)
		require.NoError(b, ch.Close())
		purge, err := conn.Channel()
		require.NoError(b, err)
		_, _ = purge.QueuePurge(name, false)
		_ = purge.Close()
	}
	n := float64(b.N * relayMessages)
	relay, plain := n/relayTime.Seconds(), n/plainTime.Seconds()
	b.ReportMetric(relay, "relay_msgs/s")
	b.ReportMetric(plain, "plain_msgs/s")
	b.ReportMetric(relay/plain, "relay/plain")
	b.ReportMetric(relay/(n/noopTime.Seconds()), "relay/noop_handler")
}
