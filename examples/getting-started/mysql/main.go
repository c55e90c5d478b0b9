// Command mysql is README's "Getting started" on MySQL or MariaDB: an order and its
// events committed together, delivered in order by a handler.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

func main() {
	ctx := context.Background()
	// parseTime for readable times; seqbox writes UTC (WithTimeLocation).
	sqldb, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/test?parseTime=true&maxAllowedPacket=0")
	if err != nil {
		log.Fatal(err)
	}
	// Keep the pool's connections: database/sql keeps 2 idle by default (README, "Keep the pool's connections").
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	db := bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC")))
	defer db.Close()
	if err := run(ctx, db); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, db *bun.DB) error {
	if _, err := db.NewRaw("CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, customer VARCHAR(64))").Exec(ctx); err != nil {
		return err
	}
	// Migrate(true) creates seqbox's tables; the queue has 4 partitions.
	ob, err := seqbox.New(db).Migrate(true).
		Queue("orders", 4, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			fmt.Printf("%s/%d seq=%d key=%s %s %s\n", d.Queue, d.Partition, d.Seq, d.Key, d.PayloadType, d.Payload)
			return nil // ack; an error retries, processor.Reject(err) dead-letters
		})).
		Start(ctx)
	if err != nil {
		return err
	}
	defer ob.Stop(context.Background())

	var ids []outbox.MessageID
	err = ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw("INSERT INTO orders (id, customer) VALUES (?, ?)", 1001, "alice").Exec(ctx); err != nil {
			return err
		}
		ids, err = ob.EnqueueBatch(ctx, tx, "orders", []outbox.Message{
			{Key: "alice", PayloadType: "order.created.v1", Payload: []byte(`{"order":1001}`)},
			{Key: "alice", PayloadType: "order.paid.v1", Payload: []byte(`{"order":1001}`)},
		})
		return err
	})
	if err != nil {
		return err
	}
	return ob.WaitProcessed(ctx, ids...) // returns once both are handled and acked
}
