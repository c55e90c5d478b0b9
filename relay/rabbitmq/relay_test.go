package rabbitmqrelay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

func amqpURL() string {
	if u := os.Getenv("SEQBOX_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// setup connects to RabbitMQ (skipping loudly, or failing under CI=true,
// when it cannot) and opens an embedded database; name is unique per test.
func setup(t testing.TB) (context.Context, *amqp.Connection, *bun.DB, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		relaytest.Unreachable(t, "RabbitMQ", "SEQBOX_AMQP_URL", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
	return ctx, conn, db, fmt.Sprintf("sbt%d", rand.Uint64()%1e12)
}

// declare creates the broker queue name (deleted at the end).
func declare(t testing.TB, conn *amqp.Connection, name string) {
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare(name, false, false, false, false, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			_ = ch.Close()
		}
	})
}

// drain reads every message of the broker queue.
func drain(t *testing.T, conn *amqp.Connection, name string) []amqp.Delivery {
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(name, true)
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// checkQueue checks what the relay promises of a broker queue that
// receives the "orders" queue of a fresh database (relaytest.Enqueue):
// every id arrived, at least once; per partition, the first arrival of
// each message comes in seq order with none skipped (1, 2, 3, …: seqs are
// gap-free); any other arrival is a repeat, from a batch published again,
// with the same message-id, partition, seq and body as the first; and the
// fields are mapped. It returns how many arrivals were repeats.
func checkQueue(t *testing.T, got []amqp.Delivery, ids []outbox.MessageID) int {
	t.Helper()
	type arrival struct {
		part int32
		seq  int64
		body string
	}
	first := map[string]arrival{}
	lastSeq := map[int32]int64{}
	repeats := 0
	for _, d := range got {
		part := d.Headers[rabbitmqrelay.HeaderPartition].(int32)
		seq := d.Headers[rabbitmqrelay.HeaderSeq].(int64)
		a := arrival{part, seq, string(d.Body)}
		if f, ok := first[d.MessageId]; ok {
			require.Equal(t, f, a, "a repeat of %s is the same message", d.MessageId)
			repeats++
			continue
		}
		first[d.MessageId] = a
		require.Equal(t, lastSeq[part]+1, seq, "partition %d's first arrivals in seq order, none skipped", part)
		lastSeq[part] = seq
		require.Equal(t, "order.v1", d.Type)
		n, err := strconv.Atoi(string(d.Body))
		require.NoError(t, err)
		require.Equal(t, "customer-"+strconv.Itoa(n%7), d.Headers[rabbitmqrelay.HeaderKey])
		require.Equal(t, strconv.Itoa(n), d.Headers["n"])
		require.Equal(t, "00-abc-def-01", d.Headers["traceparent"])
		require.Equal(t, uint8(amqp.Persistent), d.DeliveryMode)
	}
	require.Len(t, first, len(ids))
	for _, id := range ids {
		require.Contains(t, first, id.String(), "missing %s", id)
	}
	return repeats
}

// TestRelayAtLeastOnceWithStableIDs: a queue relayed to a broker queue
// arrives whole and in order per partition; batches whose seqbox ack is
// lost after the broker confirmed them are published again, and every
// repeat carries the same message-id, so a consumer can drop it.
func TestRelayAtLeastOnceWithStableIDs(t *testing.T) {
	ctx, conn, db, name := setup(t)
	declare(t, conn, name)
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: func(processor.Delivery) string { return name }})
	require.NoError(t, err)
	var repeated atomic.Int64
	loseAcks := relaytest.PublishTwice(&repeated)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, processor.Use(loseAcks), processor.BatchSize(50), processor.Retry(time.Millisecond, 5*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 300)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Positive(t, repeated.Load())
	repeats := checkQueue(t, drain(t, conn, name), ids)
	require.Positive(t, repeats, "at-least-once: the lost acks' batches arrived again, with their ids")
}

// TestRelayReturnedIsAFailure: a message the broker cannot route (no queue
// bound yet) is returned, which the relay counts as a failure: the
// partition retries and skips nothing; once the queue exists, everything
// arrives in order.
func TestRelayReturnedIsAFailure(t *testing.T) {
	ctx, conn, db, name := setup(t)
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: func(processor.Delivery) string { return name }})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 2, h, processor.Retry(20*time.Millisecond, 50*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 100)
	require.Eventually(t, func() bool { return ob.Counters().Retried >= 4 }, time.Minute, 10*time.Millisecond)
	require.Zero(t, ob.Counters().Delivered, "a returned message is not delivered")
	declare(t, conn, name)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Zero(t, checkQueue(t, drain(t, conn, name), ids), "nothing was confirmed before, so nothing repeats")
}

func TestConfigRefused(t *testing.T) {
	_, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{})
	require.ErrorIs(t, err, rabbitmqrelay.ErrConfig)
	_, err = rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: &amqp.Connection{},
		Dial: func() (*amqp.Connection, error) { return nil, errors.New("unused") }, RoutingKey: rabbitmqrelay.ByQueue})
	require.ErrorIs(t, err, rabbitmqrelay.ErrConfig, "Connection and Dial both")
}

// TestContextHeaders: headers from the handler's context (the relay's
// consumer span, with seqboxotel) replace the message's own of that name.
func TestContextHeaders(t *testing.T) {
	ctx, conn, db, name := setup(t)
	declare(t, conn, name)
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: func(processor.Delivery) string { return name },
		ContextHeaders: func(context.Context, string) map[string]string { return map[string]string{"traceparent": "00-relay"} }})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 1, h).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 3)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	got := drain(t, conn, name)
	require.Len(t, got, 3)
	for _, d := range got {
		require.Equal(t, "00-relay", d.Headers["traceparent"])
		require.Equal(t, string(d.Body), d.Headers["n"])
	}
}

// TestRelayBrokerDown: the broker goes away mid-stream (every connection
// cut, new ones refused): partitions retry with backoff, skip nothing, and
// with Dial the relay reconnects once the broker is back; everything
// arrives, each partition's first arrivals in order.
func TestRelayBrokerDown(t *testing.T) {
	ctx, conn, db, name := setup(t)
	declare(t, conn, name)
	proxy := relaytest.NewProxy(t, "127.0.0.1:5672")
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{
		Dial:       func() (*amqp.Connection, error) { return amqp.Dial("amqp://guest:guest@" + proxy.Addr() + "/") },
		RoutingKey: func(processor.Delivery) string { return name }})
	require.NoError(t, err)
	ids := relaytest.BrokerDown(ctx, t, db, h, proxy, 300)
	checkQueue(t, drain(t, conn, name), ids)
}
