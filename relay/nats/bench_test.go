package natsrelay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	natsrelay "github.com/seqbox/seqbox/relay/nats"
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
	msgs := make([]outbox.Message, relayMessages)
	for i := range msgs {
		msgs[i] = outbox.Message{Key: "k" + strconv.Itoa(i%64), PayloadType: "t", Payload: make([]byte, 256)}
	}
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		queue := "q" + strconv.Itoa(i)
		prod, err := seqbox.New(db).Migrate(true).ProducerOnly().Queue(queue, 16, nil).Start(ctx)
		require.NoError(b, err)
		ids, err := prod.EnqueueBatch(ctx, db, queue, msgs)
		require.NoError(b, err)
		require.NoError(b, prod.Stop(ctx))

		h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: subject})
		require.NoError(b, err)
		began := time.Now()
		ob, err := seqbox.New(db).Queue(queue, 16, h, processor.BatchSize(1000)).Start(ctx)
		require.NoError(b, err)
		require.NoError(b, ob.WaitProcessed(ctx, ids...))
		relayTime += time.Since(began)
		require.NoError(b, ob.Stop(ctx))

		// The same drain with a handler that does nothing: the outbox's share.
		noopQueue := queue + "noop"
		prod, err = seqbox.New(db).ProducerOnly().Queue(noopQueue, 16, nil).Start(ctx)
		require.NoError(b, err)
		ids, err = prod.EnqueueBatch(ctx, db, noopQueue, msgs)
		require.NoError(b, err)
		require.NoError(b, prod.Stop(ctx))
		began = time.Now()
		ob, err = seqbox.New(db).Queue(noopQueue, 16, processor.LeasedBatch(func(context.Context, *processor.Batch) error { return nil }),
			processor.BatchSize(1000)).Start(ctx)
		require.NoError(b, err)
		require.NoError(b, ob.WaitProcessed(ctx, ids...))
		noopTime += time.Since(began)
		require.NoError(b, ob.Stop(ctx))

		began = time.Now()
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
	n := float64(b.N * relayMessages)
	relay, plain := n/relayTime.Seconds(), n/plainTime.Seconds()
	b.ReportMetric(relay, "relay_msgs/s")
	b.ReportMetric(plain, "plain_msgs/s")
	b.ReportMetric(relay/plain, "relay/plain")
	b.ReportMetric(relay/(n/noopTime.Seconds()), "relay/noop_handler")
}
