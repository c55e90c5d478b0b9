// Package redisrelay publishes a seqbox queue to Redis Streams: a ready
// handler for processor.LeasedBatch.
//
// Each partition is its own stream, and each message's entry id is its
// seq ("<seq>-0"). Redis refuses an id not above the stream's last one, so
// a stream can never hold a partition's messages out of order or twice: a
// batch published again after a crash gets that refusal for what is
// already there, and the relay then checks that the entry at that id is
// the same seqbox message (field "id") before counting it as published (or
// that the stream was trimmed past it: its first entry is above it). A
// different message at that id (the seqbox tables were recreated, say, and
// seqs restarted while the stream stayed) is an error that stops the
// partition, never a silent skip.
//
// Redis Cluster: give Config.Client a cluster client. Each partition's
// stream is one key, so each batch's script runs on the master that holds
// it. While a master is down its partitions retry until it is back (and,
// under the default cluster-require-full-coverage yes, every other
// partition too, once the cluster has marked it failed). Without replicas
// and with appendfsync always, nothing Redis acknowledged is lost across a
// master's crash; with replicas, a failover can lose acknowledged writes
// (docs/CLUSTERS.md).
//
// It is its own Go module, so that the core does not depend on go-redis.
package redisrelay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/relay/relaykit"
)

// Fields of every entry; the message's headers follow as "header.<name>".
const (
	FieldID          = "id"
	FieldQueue       = "queue"
	FieldPartition   = "partition"
	FieldKey         = "key" // only when the message has a key
	FieldPayloadType = "type"
	FieldPayload     = "payload"
	HeaderPrefix     = "header."
)

// Config is a relay's configuration.
type Config struct {
	// Client publishes; required: a *redis.Client, or a *redis.ClusterClient
	// for Redis Cluster. Every call the relay makes touches one key, the
	// partition's stream (the batch script declares it as its only key and
	// reads or writes nothing else), so nothing crosses slots whatever
	// Stream returns; see docs/CLUSTERS.md for what a cluster does and
	// does not guarantee.
	Client redis.Cmdable
	// Stream names a partition's stream; defaults to StreamPrefix("seqbox").
	Stream func(queue string, partition int) string
	// ContextHeaders, when set, adds the headers it returns for the handler's
	// context to every message, over the message's own: with
	// seqboxotel.EnqueueHeaders() the broker's consumers continue the trace
	// from the relay's consumer span instead of the enqueuing one.
	ContextHeaders func(ctx context.Context, queue string) map[string]string
}

// StreamPrefix returns a Stream naming prefix:queue:partition.
func StreamPrefix(prefix string) func(queue string, partition int) string {
	return func(queue string, partition int) string {
		return prefix + ":" + queue + ":" + strconv.Itoa(partition)
	}
}

// ErrConfig matches a Config that cannot work; ErrConflict a stream that
// holds another message at a message's id.
var (
	ErrConfig   = errors.New("redisrelay: invalid config")
	ErrConflict = errors.New("redisrelay: the stream holds another message at this seq")
)

// Handler returns the relay as a leased batch handler for a queue.
func Handler(cfg Config) (processor.Handler, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is nil", ErrConfig)
	}
	if cfg.Stream == nil {
		cfg.Stream = StreamPrefix("seqbox")
	}
	r := &relay{cfg: cfg}
	return processor.LeasedBatch(r.publish), nil
}

type relay struct{ cfg Config }

// EntryID is a message's entry id in its partition's stream.
func EntryID(seq int64) string { return strconv.FormatInt(seq, 10) + "-0" }

// Args is the XADD of a delivery.
func Args(d processor.Delivery, stream string) *redis.XAddArgs {
	values := make([]any, 0, 12+2*len(d.Headers))
	values = append(values, FieldID, d.ID.String(), FieldQueue, d.Queue, FieldPartition, strconv.Itoa(d.Partition),
		FieldPayloadType, d.PayloadType, FieldPayload, d.Payload)
	if d.Key != "" {
		values = append(values, FieldKey, d.Key)
	}
	for k, v := range d.Headers {
		values = append(values, HeaderPrefix+k, v)
	}
	return &redis.XAddArgs{Stream: stream, ID: EntryID(d.Seq), Values: values}
}

// appendScript adds a batch's entries to one stream in order and stops at
// the first refusal, in one round trip: a pipeline of XADDs would go on
// after a refused one and store later seqs before it. It returns the count
// added and the refusal's text ("" when all went in). ARGV: per message
// its entry id, its field count, then the fields and values.
var appendScript = redis.NewScript(`
local i, added = 1, 0
while i <= #ARGV do
  local id, n = ARGV[i], tonumber(ARGV[i + 1])
  local r = redis.pcall('XADD', KEYS[1], id, unpack(ARGV, i + 2, i + 1 + n))
  if type(r) == 'table' and r.err then return {added, r.err} end
  added = added + 1
  i = i + 2 + n
end
return {added, ''}
`)

// publish appends the batch to its partition's stream and acks what is
// there; the first failure ends the call, so the partition retries.
func (r *relay) publish(ctx context.Context, b *processor.Batch) error {
	msgs := relaykit.WithContextHeaders(ctx, r.cfg.ContextHeaders, b.Messages)
	if len(b.Messages) == 0 {
		return nil
	}
	stream := r.cfg.Stream(b.Messages[0].Queue, b.Messages[0].Partition)
	for done := 0; done < len(b.Messages); {
		var argv []any
		for _, d := range msgs[done:] {
			values := Args(d, stream).Values.([]any)
			argv = append(append(argv, EntryID(d.Seq), len(values)), values...)
		}
		res, err := appendScript.Run(ctx, r.cfg.Client, []string{stream}, argv...).Slice()
		if err != nil {
			return fmt.Errorf("redisrelay: append to %s: %w", stream, err)
		}
		added, _ := res[0].(int64)
		refusal, _ := res[1].(string)
		done += int(added)
		b.Ack(done)
		if refusal == "" {
			break
		}
		d := b.Messages[done]
		if !isNotAbove(errors.New(refusal)) {
			return fmt.Errorf("redisrelay: XADD %s %s: %s", stream, EntryID(d.Seq), refusal)
		}
		if err := r.samePublished(ctx, stream, d); err != nil {
			return err
		}
		done++ // already there: published before
		b.Ack(done)
	}
	return nil
}

// isNotAbove recognises Redis's refusal of an id not above the stream's top.
func isNotAbove(err error) bool {
	return strings.Contains(err.Error(), "equal or smaller than the target stream top item")
}

// idAbove reports an entry id "<ms>-<n>" above seq's entry id.
func idAbove(id string, seq int64) bool {
	ms, n, _ := strings.Cut(id, "-")
	top, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return false
	}
	return top > seq || (top == seq && n != "0")
}

// samePublished checks that the entry at d's id is d, published earlier.
func (r *relay) samePublished(ctx context.Context, stream string, d processor.Delivery) error {
	id := EntryID(d.Seq)
	got, err := r.cfg.Client.XRange(ctx, stream, id, id).Result()
	if err != nil {
		return fmt.Errorf("redisrelay: XRANGE %s %s: %w", stream, id, err)
	}
	if len(got) == 1 && got[0].Values[FieldID] == d.ID.String() {
		return nil
	}
	held := "nothing"
	if len(got) == 1 {
		held = fmt.Sprintf("message %v", got[0].Values[FieldID])
	} else {
		// Gone, but below the stream's first entry: trimmed (MAXLEN,
		// MINID) after it was published and read.
		first, err := r.cfg.Client.XRangeN(ctx, stream, "-", "+", 1).Result()
		if err != nil {
			return fmt.Errorf("redisrelay: XRANGE %s - + COUNT 1: %w", stream, err)
		}
		if len(first) == 1 && idAbove(first[0].ID, d.Seq) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s at %s holds %s, not %s (seqs restarted under an old stream?)", ErrConflict, stream, id, held, d.ID)
}
