package natsrelay_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	natsrelay "github.com/seqbox/seqbox/relay/nats"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// BenchmarkRelay measures, in one run, the relay draining a backlog of
// relayMessages from an embedded (SQLite) outbox into a stream, and a plain
// loop publishing the same messages with the same client (pipelined, every
// acknowledgement awaited, Nats-Msg-Id set): relay_msgs/s, plain_msgs/s
// and their ratio; and relay/noop_handler, the relay against the same
// drain with a handler that does nothing (the outbox's own share of the
// cost, which the plain loop does not have).
func BenchmarkRelay(b *testing.B) {
	const relayMessages = 20000
	ctx, js, db, name := setup(b)
	createStream(ctx, b, js, name)
	subject := natsrelay.SubjectPrefix(name, false)
	msgs := relaytest.BenchMessages(relayMessages)
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		queue := "q" + strconv.Itoa(i)
		h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: subject})
		require.NoError(b, err)
		relayTime += relaytest.Drain(ctx, b, db, queue, msgs, h)
		noopTime += relaytest.Drain(ctx, b, db, queue+"noop", msgs, relaytest.NoopHandler())

		began := time.Now()
		futures := make([]jetstream.PubAckFuture, len(msgs))
		for j, m := range msgs {
			d := processor.Delivery{ID: outbox.MessageID{byte(i), byte(j >> 8), byte(j), 1}, Queue: queue, Key: m.Key,
				Seq: int64(j + 1), PayloadType: m.PayloadType, Payload: m.Payload}
			futures[j], err = js.PublishMsgAsync(natsrelay.Msg(d, subject(d)), jetstream.WithMsgID(d.ID.String()))
			require.NoError(b, err)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		plainTime += time.Since(began)
	}
	relaytest.Report(b, b.N*relayMessages, relayTime, plainTime, noopTime)
}
