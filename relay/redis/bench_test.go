package redisrelay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	redisrelay "github.com/seqbox/seqbox/relay/redis"
)

// BenchmarkRelay measures, in one run, the relay draining a backlog of
// relayMessages from an embedded (SQLite) outbox into per-partition
// streams, and a plain loop appending the same entries with the same
// client (one pipeline per 1,000): relay_msgs/s, plain_msgs/s and their
// ratio; and relay/noop_handler, the relay against the same drain with a
// handler that does nothing (the outbox's own share of the cost).
func BenchmarkRelay(b *testing.B) {
	const relayMessages = 20000
	ctx, rc, db, prefix := setup(b)
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

		h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: redisrelay.StreamPrefix(prefix)})
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
		plain := redisrelay.StreamPrefix(prefix + "plain")
		for start := 0; start < len(msgs); start += 1000 {
			_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for j := start; j < min(start+1000, len(msgs)); j++ {
					d := processor.Delivery{ID: outbox.MessageID{byte(i), byte(j >> 8), byte(j), 1}, Queue: queue, Key: msgs[j].Key,
						Partition: j % 16, Seq: int64(j/16 + 1), PayloadType: msgs[j].PayloadType, Payload: msgs[j].Payload}
					p.XAdd(ctx, redisrelay.Args(d, plain(queue, d.Partition)))
				}
				return nil
			})
			require.NoError(b, err)
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
