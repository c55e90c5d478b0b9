package seqbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"
	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Example is a first program, the one README's "Getting started" walks
// through: an outbox on a SQLite file, a queue whose handler prints what it
// gets, and an order written together with its events in one transaction.
// One key, one partition: the handler sees the events in enqueue order.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch directory.
	defer os.RemoveAll(dir)

	// SQLite as seqbox needs it: WAL, a busy timeout, immediate transactions.
	sqldb, err := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "shop.db")))
	if err != nil {
		panic(err)
	}
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	_, _ = db.NewRaw("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)").Exec(ctx) // the application's own table

	// Migrate(true) creates seqbox's tables. The handler acks with nil; an
	// error retries the message, processor.Reject dead-letters it.
	ob, err := seqbox.New(db).Migrate(true).
		Queue("orders", 4, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			fmt.Printf("%s/%d seq=%d key=%s %s %s\n", d.Queue, d.Partition, d.Seq, d.Key, d.PayloadType, d.Payload)
			return nil
		})).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx) // lets in-flight handlers finish

	// The order and its events commit together, or none of them does.
	var ids []outbox.MessageID
	err = ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw("INSERT INTO orders (id, customer) VALUES (1001, 'alice')").Exec(ctx); err != nil {
			return err
		}
		var err error
		ids, err = ob.EnqueueBatch(ctx, tx, "orders", []outbox.Message{
			{Key: "alice", PayloadType: "order.created.v1", Payload: []byte(`{"order":1001}`)},
			{Key: "alice", PayloadType: "order.paid.v1", Payload: []byte(`{"order":1001}`)},
		})
		return err
	})
	if err != nil {
		panic(err)
	}
	if err := ob.WaitProcessed(ctx, ids...); err != nil { // until handled and acked
		panic(err)
	}
	// Output:
	// orders/3 seq=1 key=alice order.created.v1 {"order":1001}
	// orders/3 seq=2 key=alice order.paid.v1 {"order":1001}
}

// Example_schema: an application that runs its schema changes with
// bun/migrate adds seqbox's to its migrations and starts without
// Migrate(true). A Start before they have run is an ErrSchemaMissing whose
// text says what to do.
func Example_schema() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	_, err := seqbox.New(db).Queue("orders", 4, nil).Start(ctx)
	fix, _, _ := strings.Cut(err.Error(), " (") // the rest is the driver's error
	fmt.Println(errors.Is(err, outbox.ErrSchemaMissing), fix)

	migrations := migrate.NewMigrator(db, seqbox.Migrations("seqbox_"))
	if err := migrations.Init(ctx); err != nil {
		panic(err)
	}
	if _, err := migrations.Migrate(ctx); err != nil {
		panic(err)
	}
	ob, err := seqbox.New(db).Queue("orders", 4, nil).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	fmt.Println("started")
	// Output:
	// true seqbox: schema missing: tables seqbox_* do not exist: run `seqbox migrate --dsn …`, or build the outbox with Migrate(true), or apply seqbox.Migrations("seqbox_") with bun/migrate
	// started
}

// A handler bug dead-letters a message; once it is fixed, the dead letter
// is replayed to the tail of its partition and resolved when acked.
func Example_deadLetters() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	var fixed atomic.Bool
	ob, err := seqbox.New(db).Migrate(true).
		Queue("invoices", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			if !fixed.Load() {
				return processor.Reject(errors.New("unknown currency"))
			}
			fmt.Printf("delivered %s (replay of a dead letter: %t)\n", d.Payload, d.Headers[deadletter.ReplayOfHeader] != "")
			return nil
		})).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	id, _ := ob.Enqueue(ctx, db, "invoices", outbox.Message{PayloadType: "invoice.v1", Payload: []byte("inv-7")})
	_ = ob.WaitProcessed(ctx, id)

	dl := ob.Admin().DeadLetters()
	page, _ := dl.List(ctx, deadletter.Filter{Queue: "invoices", Statuses: []deadletter.Status{deadletter.StatusPending}}, 0, 10)
	fmt.Println(len(page.Letters), page.Letters[0].Status, page.Letters[0].LastError)

	fixed.Store(true) // the bug is fixed and deployed
	changed, err := dl.Replay(ctx, deadletter.Matching(deadletter.Filter{Queue: "invoices"}))
	if err != nil {
		panic(err)
	}
	_ = ob.WaitProcessed(ctx, changed.ReplayIDs...)
	letter, _ := dl.Get(ctx, id)
	fmt.Println(letter.Status)
	// Output:
	// 1 pending seqbox: message rejected: unknown currency
	// delivered inv-7 (replay of a dead letter: true)
	// resolved
}

// Example_park: a queue whose consumer must never see a later message
// before an earlier one parks a partition at a head that keeps failing,
// instead of dead-lettering it and moving on. Once the cause is fixed, an
// operator resumes the partition (or skips the head); the CLI does the
// same with seqbox partitions resume|skip.
func Example_park() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	var ledgerUp atomic.Bool
	ob, err := seqbox.New(db).Migrate(true).Logger(slog.New(slog.DiscardHandler)).
		Queue("ledger", 1, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			if !ledgerUp.Load() {
				return errors.New("ledger unavailable")
			}
			fmt.Printf("posted %s\n", d.Payload)
			return nil
		}), processor.MaxAttempts(3), processor.Retry(time.Millisecond, 10*time.Millisecond),
			processor.OnFailure(processor.Park)).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	var ids []outbox.MessageID
	for _, entry := range []string{"debit-1", "credit-1"} {
		id, _ := ob.Enqueue(ctx, db, "ledger", outbox.Message{PayloadType: "entry.v1", Payload: []byte(entry)})
		ids = append(ids, id)
	}

	admin := ob.Admin().Partitions()
	for {
		parked, _ := admin.Parked(ctx, "ledger")
		if len(parked) == 1 {
			fmt.Printf("parked at seq %d after %d attempts: %s\n", parked[0].HeadSeq, parked[0].Attempts, parked[0].LastError)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	ledgerUp.Store(true) // the ledger is back
	if _, err := admin.Resume(ctx, "ledger", 0); err != nil {
		panic(err)
	}
	_ = ob.WaitProcessed(ctx, ids...)
	// Output:
	// parked at seq 1 after 3 attempts: ledger unavailable
	// posted debit-1
	// posted credit-1
}

// Example_typed: values in, values out. JSONMessage encodes a value as a
// message's payload; a processor.JSON handler gets it decoded (a payload
// that does not decode is dead-lettered, never retried); middleware wraps
// every call of every queue (here, a log line per batch).
func Example_typed() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	type shipped struct {
		Order   int    `json:"order"`
		Carrier string `json:"carrier"`
	}
	logCalls := func(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
		err := next(ctx)
		fmt.Printf("%s/%d: %d message(s), error %v\n", c.Queue, c.Partition, len(c.Batch.Messages), err)
		return err
	}
	ob, err := seqbox.New(db).Migrate(true).QueueDefaults(processor.Use(logCalls)).
		Queue("shipping", 1, processor.JSON(func(ctx context.Context, d processor.Typed[shipped]) error {
			fmt.Printf("order %d ships with %s\n", d.Value.Order, d.Value.Carrier)
			return nil
		})).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	msg, err := outbox.JSONMessage("shipped.v1", shipped{Order: 42, Carrier: "DHL"})
	if err != nil {
		panic(err)
	}
	id, _ := ob.Enqueue(ctx, db, "shipping", msg)
	_ = ob.WaitProcessed(ctx, id)
	// Output:
	// order 42 ships with DHL
	// shipping/0: 1 message(s), error <nil>
}

// Idempotent enqueue: a retried request that enqueues the same DedupKey
// within the queue's window (here one hour) gets the first message's id
// back, and nothing is written twice.
func Example_dedup() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	charged := make(chan string, 10)
	ob, err := seqbox.New(db).Migrate(true).
		Queue("payments", 4, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			charged <- string(d.Payload)
			return nil
		}), processor.DedupWindow(time.Hour)).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	charge := outbox.Message{Key: "customer-7", DedupKey: "request-a1b2", PayloadType: "charge.v1", Payload: []byte("19.99 EUR")}
	first, _ := ob.Enqueue(ctx, db, "payments", charge)
	retry, _ := ob.EnqueueBatchResult(ctx, db, "payments", []outbox.Message{charge}) // the client retried the request
	fmt.Println("retry is a duplicate:", retry[0].Duplicate, "same id:", retry[0].ID == first)
	_ = ob.WaitProcessed(ctx, first)
	fmt.Println("charges:", len(charged), <-charged)
	// Output:
	// retry is a duplicate: true same id: true
	// charges: 1 19.99 EUR
}

// Purge by header: an organisation is deleted, and its messages that are
// still waiting go with it; the other tenants' messages are delivered.
func Example_purge() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	// A producer-only process: the messages wait, as behind a slow consumer.
	producer, err := seqbox.New(db).Migrate(true).ProducerOnly().Queue("mail", 2, nil).Start(ctx)
	if err != nil {
		panic(err)
	}
	for _, tenant := range []string{"42", "7", "42"} {
		_, _ = producer.Enqueue(ctx, db, "mail", outbox.Message{Key: "tenant-" + tenant, PayloadType: "mail.v1",
			Payload: []byte("hello " + tenant), Headers: map[string]string{"tenant": tenant}})
	}
	gone := outbox.PurgeFilter{Headers: map[string]string{"tenant": "42"}}
	preview, _ := producer.Admin().PreviewPurge(ctx, "mail", gone)
	fmt.Println("would purge:", preview.Incoming+preview.Outgoing)
	res, err := producer.Admin().Purge(ctx, "mail", gone)
	if err != nil {
		panic(err)
	}
	fmt.Println("purged:", res.Incoming+res.Outgoing)
	_ = producer.Stop(ctx)

	sent := make(chan string, 10)
	consumer, err := seqbox.New(db).Queue("mail", 2, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		sent <- string(d.Payload)
		return nil
	})).Start(ctx)
	if err != nil {
		panic(err)
	}
	defer consumer.Stop(ctx)
	fmt.Println("sent:", <-sent)
	// Output:
	// would purge: 2
	// purged: 2
	// sent: hello 7
}

// The message's key reaches the handler (Delivery.Key), as a relay needs it
// for a broker's partition or routing key; it also picked the partition.
func Example_messageKey() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	got := make(chan processor.Delivery, 1)
	ob, err := seqbox.New(db).Migrate(true).
		Queue("orders", 8, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			got <- d
			return nil
		})).
		Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	_, _ = ob.Enqueue(ctx, db, "orders", outbox.Message{Key: "customer-7", PayloadType: "order.created.v1"})
	d := <-got
	fmt.Println("key:", d.Key, "partition:", d.Partition == outbox.PartitionForKey("customer-7", 8))
	// Output:
	// key: customer-7 partition: true
}
