package redisrelay_test

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	redisrelay "github.com/seqbox/seqbox/relay/redis"
)

// Relay the "orders" queue to Redis Streams: orders:events:<partition>,
// one stream per partition, each message at entry id "<seq>-0", so a
// consumer reads a partition in order and never sees one message twice.
// (Not run by go test: it needs a Redis server.)
func Example() {
	ctx := context.Background()
	var db *bun.DB // your database
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rc.Close()

	relay, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: redisrelay.StreamPrefix("orders:events")})
	if err != nil {
		panic(err)
	}
	// A broker that is down makes the partition retry; never give up on it.
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 16, relay, processor.MaxAttempts(processor.MaxAttemptsNever)).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	_, _ = ob.Enqueue(ctx, db, "orders", outbox.Message{Key: "customer-7", PayloadType: "order.created.v1", Payload: []byte(`{"id":42}`)})
}
