package kafkarelay_test

import (
	"context"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	kafkarelay "github.com/seqbox/seqbox/relay/kafka"
)

// Relay the "orders" queue to the "orders" topic, each record keyed by the
// message's key, so Kafka's partitioner keeps every customer's events in
// one partition and in order. At-least-once: a relay that dies after
// Kafka confirmed a batch and before seqbox acked it produces the batch
// again, so consumers drop repeats by the seqbox-id header. (Not run by go
// test: it needs a Kafka cluster.)
func Example() {
	ctx := context.Background()
	var db *bun.DB // your database
	// franz-go's defaults are what the relay needs: an idempotent producer,
	// acks from all in-sync replicas, retries without limit.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	relay, err := kafkarelay.Handler(kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic("orders")})
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

// The transactional relay: each batch committed in a Kafka transaction,
// for consumers reading with isolation level read_committed. The
// transactional ID is the process's own and the same across its
// restarts (here, the pod's name). (Not run by go test: it needs a Kafka
// cluster.)
func Example_transactional() {
	ctx := context.Background()
	var db *bun.DB // your database
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.TransactionalID("orders-relay-"+os.Getenv("POD_NAME")))
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	relay, err := kafkarelay.Handler(kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic("orders"), Transactional: true})
	if err != nil {
		panic(err)
	}
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 16, relay, processor.MaxAttempts(processor.MaxAttemptsNever)).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
}
