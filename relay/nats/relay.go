// Package natsrelay publishes a seqbox queue to NATS JetStream: a ready
// handler for processor.LeasedBatch that publishes each batch pipelined,
// waits for the stream's acknowledgements, and acks the longest confirmed
// prefix.
//
// Every message is published with its seqbox id as Nats-Msg-Id, so a batch
// published again after a crash or a failed confirm is stored once: the
// stream drops a message whose id it has seen within its duplicate window
// (StreamConfig.Duplicates, 2 minutes by default). The window is the
// guarantee's reach: a redelivery later than the window after the first
// publish (a partition parked for an hour, say) is stored twice. Set the
// window above the longest stop you expect, within the memory it costs.
//
// Order: the messages of a partition are published in seq order, on one
// connection, and a failure retries from the first unconfirmed message.
// The stream stores them in order unless it refuses a message and accepts
// the next one of the same batch (a limit that refuses one message and not
// another, e.g. MaxMsgSize): the refused one, stored on a later retry,
// then follows it. Set Config.Sequential for one publish at a time.
//
// Pipelined publishes keep their order across a reconnect only if the
// connection does not buffer publishes while it reconnects: with a buffer
// (nats.go's default, 8 MB), a message written to the connection that
// broke is lost while the ones after it wait in the buffer and are stored
// once the client reconnects, ahead of the lost one's retry. Handler
// therefore refuses a connection with a reconnect buffer unless
// Sequential is set: connect with nats.ReconnectBufSize(-1), and a
// publish while reconnecting fails at once, so the batch retries from the
// first unconfirmed message.
//
// A JetStream cluster needs nothing of the relay: connect with every
// member's URL and nats.MaxReconnects(-1), and an R3 stream goes on
// through a member's crash, the stream's leader included; the duplicate
// window spans the leader change (docs/CLUSTERS.md).
//
// It is its own Go module, so that the core does not depend on nats.go.
package natsrelay

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/relay/relaykit"
)

// Headers the relay sets on every published message, besides the
// message's own headers (copied as they are, trace context included).
const (
	HeaderMsgID       = jetstream.MsgIDHeader // the seqbox message id
	HeaderQueue       = "Seqbox-Queue"
	HeaderPartition   = "Seqbox-Partition"
	HeaderSeq         = "Seqbox-Seq"
	HeaderKey         = "Seqbox-Key" // when the message has a key
	HeaderPayloadType = "Seqbox-Payload-Type"
)

// Config is a relay's configuration.
type Config struct {
	// JetStream publishes; required.
	JetStream jetstream.JetStream
	// Subject is the subject a delivery is published to; required. See
	// SubjectPrefix for the common shape.
	Subject func(d processor.Delivery) string
	// Stream, when set, is the stream every message must land in
	// (Nats-Expected-Stream): a subject bound to no stream, or to another,
	// fails the publish instead of being accepted by the wrong stream.
	Stream string
	// Sequential publishes one message at a time, each after the previous
	// one's acknowledgement: strict order even when the stream refuses a
	// single message, at one round trip per message.
	Sequential bool
	// ContextHeaders, when set, adds the headers it returns for the handler's
	// context to every message, over the message's own: with
	// seqboxotel.EnqueueHeaders() the broker's consumers continue the trace
	// from the relay's consumer span instead of the enqueuing one.
	ContextHeaders func(ctx context.Context, queue string) map[string]string
}

// SubjectPrefix returns a Subject that publishes to prefix.queue, or to
// prefix.queue.key when withKey and the message has a key (the key must
// then be a valid subject token).
func SubjectPrefix(prefix string, withKey bool) func(d processor.Delivery) string {
	return func(d processor.Delivery) string {
		if withKey && d.Key != "" {
			return prefix + "." + d.Queue + "." + d.Key
		}
		return prefix + "." + d.Queue
	}
}

// ErrConfig matches a Config that cannot work.
var ErrConfig = errors.New("natsrelay: invalid config")

// Handler returns the relay as a leased batch handler for a queue.
func Handler(cfg Config) (processor.Handler, error) {
	switch {
	case cfg.JetStream == nil:
		return nil, fmt.Errorf("%w: JetStream is nil", ErrConfig)
	case cfg.Subject == nil:
		return nil, fmt.Errorf("%w: Subject is nil", ErrConfig)
	case !cfg.Sequential && cfg.JetStream.Conn() != nil && cfg.JetStream.Conn().Opts.ReconnectBufSize >= 0:
		return nil, fmt.Errorf("%w: the connection buffers publishes while it reconnects, which can store a batch "+
			"out of order across a reconnect: connect with nats.ReconnectBufSize(-1), or set Sequential", ErrConfig)
	}
	r := &relay{cfg: cfg}
	return processor.LeasedBatch(r.publish), nil
}

type relay struct{ cfg Config }

// Msg is the NATS message a delivery is published as.
func Msg(d processor.Delivery, subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = d.Payload
	for k, v := range d.Headers {
		m.Header.Set(k, v)
	}
	m.Header.Set(HeaderQueue, d.Queue)
	m.Header.Set(HeaderPartition, strconv.Itoa(d.Partition))
	m.Header.Set(HeaderSeq, strconv.FormatInt(d.Seq, 10))
	m.Header.Set(HeaderPayloadType, d.PayloadType)
	if d.Key != "" {
		m.Header.Set(HeaderKey, d.Key)
	}
	return m
}

func (r *relay) opts(d processor.Delivery) []jetstream.PublishOpt {
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(d.ID.String())}
	if r.cfg.Stream != "" {
		opts = append(opts, jetstream.WithExpectStream(r.cfg.Stream))
	}
	return opts
}

// publish sends the batch and acks the confirmed prefix; the first failure
// ends the call with its error, so the partition retries from there.
func (r *relay) publish(ctx context.Context, b *processor.Batch) error {
	msgs := relaykit.WithContextHeaders(ctx, r.cfg.ContextHeaders, b.Messages)
	if r.cfg.Sequential {
		for i, d := range msgs {
			if _, err := r.cfg.JetStream.PublishMsg(ctx, Msg(d, r.cfg.Subject(d)), r.opts(d)...); err != nil {
				return fmt.Errorf("natsrelay: publish seq %d: %w", d.Seq, err)
			}
			b.Ack(i + 1)
		}
		return nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(b.Messages))
	var sendErr error
	for _, d := range msgs {
		f, err := r.cfg.JetStream.PublishMsgAsync(Msg(d, r.cfg.Subject(d)), r.opts(d)...)
		if err != nil {
			sendErr = fmt.Errorf("natsrelay: publish seq %d: %w", d.Seq, err)
			break
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
			b.Ack(i + 1)
		case err := <-f.Err():
			return fmt.Errorf("natsrelay: seq %d not confirmed: %w", b.Messages[i].Seq, err)
		case <-ctx.Done():
			return fmt.Errorf("natsrelay: seq %d not confirmed: %w", b.Messages[i].Seq, ctx.Err())
		}
	}
	return sendErr
}
