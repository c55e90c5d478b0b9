package rabbitmqrelay_test

import (
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
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
	msgs := relaytest.BenchMessages(relayMessages)
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: route, Transient: true})
		require.NoError(b, err)
		relayTime += relaytest.Drain(ctx, b, db, "q"+strconv.Itoa(i), msgs, h)
		noopTime += relaytest.Drain(ctx, b, db, "noop"+strconv.Itoa(i), msgs, relaytest.NoopHandler())

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
	relaytest.Report(b, b.N*relayMessages, relayTime, plainTime, noopTime)
}
