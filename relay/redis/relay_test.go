package redisrelay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	redisrelay "github.com/seqbox/seqbox/relay/redis"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

func redisAddr() string {
	if a := os.Getenv("SEQBOX_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// setup connects to Redis (skipping loudly, or failing under CI=true, when
// it cannot) and opens an embedded database; prefix is unique per test and
// its streams are deleted at the end.
func setup(t testing.TB) (context.Context, *redis.Client, *bun.DB, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	rc := redis.NewClient(&redis.Options{Addr: redisAddr(), DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Ping(ctx).Err(); err != nil {
		relaytest.Unreachable(t, "Redis", "SEQBOX_REDIS_ADDR", err)
	}
	prefix := fmt.Sprintf("sbt%d", rand.Uint64()%1e12)
	t.Cleanup(func() {
		keys, _ := rc.Keys(context.Background(), prefix+":*").Result()
		if len(keys) > 0 {
			_ = rc.Del(context.Background(), keys...).Err()
		}
	})
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
	return ctx, rc, db, prefix
}

// checkStreams: every id once, each partition's stream in seq order with
// the seq as entry id, fields mapped.
func checkStreams(ctx context.Context, t *testing.T, rc redis.Cmdable, stream func(string, int) string, partitions int, ids []outbox.MessageID) {
	t.Helper()
	seen := map[string]bool{}
	for p := range partitions {
		entries, err := rc.XRange(ctx, stream("orders", p), "-", "+").Result()
		require.NoError(t, err)
		for i, e := range entries {
			require.Equal(t, redisrelay.EntryID(int64(i+1)), e.ID, "partition %d: seqs 1, 2, 3, … as entry ids", p)
			id := e.Values[redisrelay.FieldID].(string)
			require.False(t, seen[id], "duplicate %s", id)
			seen[id] = true
			require.Equal(t, strconv.Itoa(p), e.Values[redisrelay.FieldPartition])
			require.Equal(t, "order.v1", e.Values[redisrelay.FieldPayloadType])
			n, err := strconv.Atoi(e.Values[redisrelay.FieldPayload].(string))
			require.NoError(t, err)
			require.Equal(t, "customer-"+strconv.Itoa(n%7), e.Values[redisrelay.FieldKey])
			require.Equal(t, strconv.Itoa(n), e.Values[redisrelay.HeaderPrefix+"n"])
			require.Equal(t, "00-abc-def-01", e.Values[redisrelay.HeaderPrefix+"traceparent"])
		}
	}
	require.Len(t, seen, len(ids))
	for _, id := range ids {
		require.True(t, seen[id.String()], "missing %s", id)
	}
}

// TestRelayOrderedOnceAcrossLostAcks: a queue relayed to per-partition
// streams arrives whole and in order; batches whose ack is lost after the
// publish (as when the process dies in between) are published again, and
// Redis's refusal of an id not above the top plus the relay's check keep
// every message once.
func TestRelayOrderedOnceAcrossLostAcks(t *testing.T) {
	ctx, rc, db, prefix := setup(t)
	stream := redisrelay.StreamPrefix(prefix)
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: stream})
	require.NoError(t, err)
	var repeated atomic.Int64
	loseAcks := relaytest.PublishTwice(&repeated)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, processor.Use(loseAcks), processor.BatchSize(50), processor.Retry(time.Millisecond, 5*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 500)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Positive(t, repeated.Load())
	checkStreams(ctx, t, rc, stream, 4, ids)
}

// TestRelayStopsOnAnotherMessage: a stream that already holds a different
// message at a seq (seqs restarted under an old stream) stops the
// partition with ErrConflict instead of skipping anything.
func TestRelayStopsOnAnotherMessage(t *testing.T) {
	ctx, rc, db, prefix := setup(t)
	stream := redisrelay.StreamPrefix(prefix)
	require.NoError(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: stream("orders", 0), ID: "1-0", Values: []any{redisrelay.FieldID, "someone-else"}}).Err())
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: stream})
	require.NoError(t, err)
	failures := make(chan error, 16)
	watch := func(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
		err := next(ctx)
		if err != nil {
			select {
			case failures <- err:
			default:
			}
		}
		return err
	}
	ob, err := seqbox.New(db).Migrate(true).
		Queue("orders", 1, h, processor.Use(watch), processor.Retry(10*time.Millisecond, 20*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	relaytest.Enqueue(ctx, t, ob, db, 3)
	require.ErrorIs(t, <-failures, redisrelay.ErrConflict)
	require.Zero(t, ob.Counters().Delivered, "nothing skipped past the conflict")
	n, err := rc.XLen(ctx, stream("orders", 0)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// TestRelayRetriesWhileRedisRefuses: while Redis refuses the writes (the
// stream key holds another type, standing in for a server that is down),
// partitions retry with backoff and skip nothing; once it accepts them,
// everything arrives in order.
func TestRelayRetriesWhileRedisRefuses(t *testing.T) {
	ctx, rc, db, prefix := setup(t)
	stream := redisrelay.StreamPrefix(prefix)
	require.NoError(t, rc.Set(ctx, stream("orders", 0), "not a stream", 0).Err())
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: stream})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 1, h, processor.Retry(20*time.Millisecond, 50*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 100)
	require.Eventually(t, func() bool { return ob.Counters().Retried >= 3 }, time.Minute, 10*time.Millisecond)
	require.Zero(t, ob.Counters().Delivered)
	require.NoError(t, rc.Del(ctx, stream("orders", 0)).Err())
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	checkStreams(ctx, t, rc, stream, 1, ids)
}

func TestConfigRefused(t *testing.T) {
	_, err := redisrelay.Handler(redisrelay.Config{})
	require.ErrorIs(t, err, redisrelay.ErrConfig)
}

// TestContextHeaders: headers from the handler's context (the relay's
// consumer span, with seqboxotel) replace the message's own of that name.
func TestContextHeaders(t *testing.T) {
	ctx, rc, db, prefix := setup(t)
	stream := redisrelay.StreamPrefix(prefix)
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: stream,
		ContextHeaders: func(context.Context, string) map[string]string { return map[string]string{"traceparent": "00-relay"} }})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 1, h).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 3)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	entries, err := rc.XRange(ctx, stream("orders", 0), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for _, e := range entries {
		require.Equal(t, "00-relay", e.Values[redisrelay.HeaderPrefix+"traceparent"])
		require.Equal(t, e.Values[redisrelay.FieldPayload], e.Values[redisrelay.HeaderPrefix+"n"])
	}
}

// TestRelayBrokerDown: Redis goes away mid-stream (every connection cut,
// new ones refused): partitions retry with backoff, skip nothing, and the
// client reconnects once it is back; every stream ends whole and in order.
func TestRelayBrokerDown(t *testing.T) {
	ctx, _, db, prefix := setup(t)
	proxy := relaytest.NewProxy(t, redisAddr())
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer rc.Close()
	stream := redisrelay.StreamPrefix(prefix)
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: stream})
	require.NoError(t, err)
	ids := relaytest.BrokerDown(ctx, t, db, h, proxy, 300)
	direct := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer direct.Close()
	checkStreams(ctx, t, direct, stream, 2, ids)
}
