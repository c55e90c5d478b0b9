// Package rabbitmqrelay publishes a seqbox queue to RabbitMQ: a ready
// handler for processor.LeasedBatch using publisher confirms.
//
// Each batch is published on a channel of its own in confirm mode, with
// mandatory routing: every publish is awaited (basic.ack), and a message
// the broker could not route (basic.return, which RabbitMQ sends before
// the ack) or refused (basic.nack) is a failure. The confirmed prefix is
// acked and the partition retries from the first failure.
//
// At-least-once: RabbitMQ has no idempotency key, so a batch published
// again after a crash (confirmed by the broker, not yet acked in seqbox)
// arrives twice. Every message carries its seqbox id as the AMQP
// message-id, the same on every publish: consumers drop what they have
// seen (an idempotent consumer, or a deduplication plugin keyed on it).
// Order: one partition's messages are published in seq order on one
// channel, so a queue bound to one routing target receives them in order;
// a redelivered batch repeats a run of them (detectable by message-id).
//
// It is its own Go module, so that the core does not depend on amqp091-go.
package rabbitmqrelay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/relay/relaykit"
)

// Headers the relay sets on every message, besides the message's own
// headers (copied as they are, trace context included).
const (
	HeaderQueue     = "seqbox-queue"
	HeaderPartition = "seqbox-partition"
	HeaderSeq       = "seqbox-seq"
	HeaderKey       = "seqbox-key" // when the message has a key
)

// Config is a relay's configuration.
type Config struct {
	// Connection opens the channel each batch is published on. Give it or
	// Dial. A closed Connection (the broker restarted) stays closed: the
	// partitions then retry until the application replaces the relay.
	Connection *amqp.Connection
	// Dial opens a connection when the relay has none or its connection
	// closed: the relay then survives a broker restart by itself. On a
	// cluster, DialCluster tries its nodes in turn, so that the relay goes
	// on through another node when its node dies (docs/CLUSTERS.md).
	Dial func() (*amqp.Connection, error)
	// Exchange is where messages are published ("" is the default
	// exchange, which routes by queue name).
	Exchange string
	// RoutingKey is a delivery's routing key; required. See ByKey and
	// ByQueue.
	RoutingKey func(d processor.Delivery) string
	// Transient publishes with delivery mode 1 (not persisted by the
	// broker); the default is persistent (2).
	Transient bool
	// ContextHeaders, when set, adds the headers it returns for the handler's
	// context to every message, over the message's own: with
	// seqboxotel.EnqueueHeaders() the broker's consumers continue the trace
	// from the relay's consumer span instead of the enqueuing one.
	ContextHeaders func(ctx context.Context, queue string) map[string]string
}

// ByQueue routes every message by its seqbox queue name.
func ByQueue(d processor.Delivery) string { return d.Queue }

// ByKey routes by the message's key, or its queue name when it has none.
func ByKey(d processor.Delivery) string {
	if d.Key != "" {
		return d.Key
	}
	return d.Queue
}

// ErrConfig matches a Config that cannot work; ErrReturned a message the
// broker could not route; ErrNacked one it refused.
var (
	ErrConfig   = errors.New("rabbitmqrelay: invalid config")
	ErrReturned = errors.New("rabbitmqrelay: message returned unroutable")
	ErrNacked   = errors.New("rabbitmqrelay: message refused by the broker")
)

// Handler returns the relay as a leased batch handler for a queue.
func Handler(cfg Config) (processor.Handler, error) {
	switch {
	case (cfg.Connection == nil) == (cfg.Dial == nil):
		return nil, fmt.Errorf("%w: give Connection or Dial (one of them)", ErrConfig)
	case cfg.RoutingKey == nil:
		return nil, fmt.Errorf("%w: RoutingKey is nil", ErrConfig)
	}
	r := &relay{cfg: cfg, conn: cfg.Connection}
	return processor.LeasedBatch(r.publish), nil
}

type relay struct {
	cfg Config

	mu   sync.Mutex // guards conn; held while dialling, so one dial at a time
	conn *amqp.Connection
}

// channel opens a channel on the relay's connection, dialling a new one
// first when there is none or it closed (and Dial is set).
func (r *relay) channel() (*amqp.Channel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.conn == nil || r.conn.IsClosed()) && r.cfg.Dial != nil {
		conn, err := safeDial(r.cfg.Dial)
		if err != nil {
			return nil, fmt.Errorf("rabbitmqrelay: dial: %w", err)
		}
		r.conn = conn
	}
	return r.conn.Channel()
}

// safeDial calls dial, a panic in it being its error.
func safeDial(dial func() (*amqp.Connection, error)) (conn *amqp.Connection, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("dial panicked: %v", p)
		}
	}()
	return dial()
}

// Publishing is the AMQP message a delivery is published as.
func Publishing(d processor.Delivery, transient bool) amqp.Publishing {
	headers := amqp.Table{HeaderQueue: d.Queue, HeaderPartition: int32(d.Partition), HeaderSeq: d.Seq}
	for k, v := range d.Headers {
		headers[k] = v
	}
	if d.Key != "" {
		headers[HeaderKey] = d.Key
	}
	mode := amqp.Persistent
	if transient {
		mode = amqp.Transient
	}
	return amqp.Publishing{MessageId: d.ID.String(), Type: d.PayloadType, Timestamp: d.EnqueuedAt, Headers: headers,
		DeliveryMode: mode, Body: d.Payload}
}

// publish sends the batch on a channel of its own and acks the prefix the
// broker confirmed and did not return.
func (r *relay) publish(ctx context.Context, b *processor.Batch) error {
	msgs := relaykit.WithContextHeaders(ctx, r.cfg.ContextHeaders, b.Messages)
	ch, err := r.channel()
	if err != nil {
		return fmt.Errorf("rabbitmqrelay: open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("rabbitmqrelay: confirm mode: %w", err)
	}
	// Buffered for the whole batch: the connection's reader hands a return
	// over before it processes the ack that follows it, and must never
	// block doing so.
	returns := ch.NotifyReturn(make(chan amqp.Return, len(b.Messages)))
	confirms := make([]*amqp.DeferredConfirmation, 0, len(b.Messages))
	var sendErr error
	for _, d := range msgs {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, r.cfg.Exchange, r.cfg.RoutingKey(d), true, false, Publishing(d, r.cfg.Transient))
		if err != nil {
			sendErr = fmt.Errorf("rabbitmqrelay: publish seq %d: %w", d.Seq, err)
			break
		}
		confirms = append(confirms, c)
	}
	// The first message not confirmed, and why.
	failed, failure := len(confirms), sendErr
	for i, c := range confirms {
		acked, err := c.WaitContext(ctx)
		if err != nil {
			failed, failure = i, fmt.Errorf("rabbitmqrelay: seq %d not confirmed: %w", b.Messages[i].Seq, err)
			break
		}
		if !acked {
			failed, failure = i, fmt.Errorf("%w: seq %d", ErrNacked, b.Messages[i].Seq)
			break
		}
	}
	// Every return came before its ack, so all of the confirmed prefix's
	// are here now.
	returned := map[string]amqp.Return{}
	for len(returns) > 0 {
		ret := <-returns
		returned[ret.MessageId] = ret
	}
	for i, d := range b.Messages[:failed] {
		if ret, ok := returned[d.ID.String()]; ok {
			b.Ack(i)
			return fmt.Errorf("%w: seq %d to %q/%q: %d %s", ErrReturned, d.Seq, ret.Exchange, ret.RoutingKey, ret.ReplyCode, ret.ReplyText)
		}
	}
	b.Ack(failed)
	return failure
}
