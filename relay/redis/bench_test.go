package redisrelay_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	redisrelay "github.com/seqbox/seqbox/relay/redis"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
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
	msgs := relaytest.BenchMessages(relayMessages)
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		queue := "q" + strconv.Itoa(i)
		h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: redisrelay.StreamPrefix(prefix)})
		require.NoError(b, err)
		relayTime += relaytest.Drain(ctx, b, db, queue, msgs, h)
		noopTime += relaytest.Drain(ctx, b, db, queue+"noop", msgs, relaytest.NoopHandler())

		began := time.Now()
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
	relaytest.Report(b, b.N*relayMessages, relayTime, plainTime, noopTime)
}
