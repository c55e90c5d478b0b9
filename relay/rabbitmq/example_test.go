package rabbitmqrelay_test

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
)

// Relay the "orders" queue to the "events" exchange, routed by each
// message's key. At-least-once: consumers drop repeats by message-id.
// (Not run by go test: it needs a RabbitMQ server.)
func Example() {
	ctx := context.Background()
	var db *bun.DB // your database
	// Dial, not a fixed connection: the relay dials again after a broker restart.
	dial := func() (*amqp.Connection, error) { return amqp.Dial("amqp://guest:guest@127.0.0.1:5672/") }
	relay, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Dial: dial, Exchange: "events", RoutingKey: rabbitmqrelay.ByKey})
	if err != nil {
		panic(err)
	}
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 16, relay, processor.MaxAttempts(processor.MaxAttemptsNever)).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	_, _ = ob.Enqueue(ctx, db, "orders", outbox.Message{Key: "customer-7", PayloadType: "order.created.v1", Payload: []byte(`{"id":42}`)})
}

// Relay to a 3-node cluster: the relay's connection is on one node, and
// when that node goes away it dials the next. Declare the broker queues as
// quorum queues (amqp.QueueTypeArg: amqp.QueueTypeQuorum), so that what
// the broker confirmed outlives a node. (Not run by go test: it needs a
// cluster.)
func ExampleDialCluster() {
	dial := rabbitmqrelay.DialCluster([]string{
		"amqp://relay:secret@rabbit-1:5672/",
		"amqp://relay:secret@rabbit-2:5672/",
		"amqp://relay:secret@rabbit-3:5672/",
	}, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)}) // pass a node that does not answer soon
	relay, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Dial: dial, Exchange: "events", RoutingKey: rabbitmqrelay.ByKey})
	if err != nil {
		panic(err)
	}
	_ = relay // a queue's handler, with processor.MaxAttempts(processor.MaxAttemptsNever)
}
