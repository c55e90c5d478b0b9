package natsrelay_test

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	natsrelay "github.com/seqbox/seqbox/relay/nats"
)

// Relay the "orders" queue to the ORDERS stream: subjects events.orders,
// one message per order event, stored once each and in order per
// partition. (Not run by go test: it needs a NATS server with JetStream.)
func Example() {
	ctx := context.Background()
	var db *bun.DB // your database
	// No reconnect buffer: a publish while reconnecting fails at once, so
	// a batch retries in order (see the package doc).
	nc, err := nats.Connect(nats.DefaultURL, nats.ReconnectBufSize(-1))
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The duplicate window is how long a re-publish after a crash is
	// recognised: keep it above the longest stop you expect.
	_, _ = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"events.>"}, Duplicates: 10 * time.Minute})

	relay, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix("events", false), Stream: "ORDERS"})
	if err != nil {
		panic(err)
	}
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 16, relay).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	_ = ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
		// … the business write, then:
		_, err := ob.Enqueue(ctx, tx, "orders", outbox.Message{Key: "customer-7", PayloadType: "order.created.v1", Payload: []byte(`{"id":42}`)})
		return err
	})
}
