// Package kafkarelay publishes a seqbox queue to Apache Kafka with
// franz-go: a ready handler for processor.LeasedBatch. Each batch is
// produced pipelined, every result awaited, and the confirmed prefix
// acked; a failure retries from the first unconfirmed message.
//
// # Partitions and order
//
// A message becomes a record keyed by its seqbox key (Config.Key, ByKey by
// default), and the client's partitioner picks the Kafka partition from
// that key: with franz-go's default partitioner, murmur2 of the key modulo
// the topic's partition count, as Kafka's Java client does. A message
// without a key becomes a record without a key (a nil key), which the
// default partitioner spreads over the partitions (sticky batches), so
// keyless messages keep no order in Kafka.
//
// Kafka keeps order per partition, so what reaches consumers in seq order
// is what shares a Kafka partition: every message of one key (seqbox puts
// a key's messages in one seqbox partition, in seq order, and Kafka's
// partitioner puts them in one Kafka partition). seqbox's order between
// different keys of one seqbox partition is not kept: their records land
// in different Kafka partitions, or interleave with other seqbox
// partitions' records in one. To keep a whole seqbox partition's order
// (keyless messages included), key records with ByPartition: each seqbox
// partition then maps to one Kafka partition, at the cost of the business
// key as the record key (it stays in the seqbox-key header).
//
// # Delivery
//
// The client's idempotent producer (franz-go's default) keeps each Kafka
// partition's records in the order they were produced across its own
// retries, and writes a retried request once. The relay hands a batch to
// the client in seq order and never cancels a record it produced: a call
// that runs out of time returns, and its records stay with the client,
// which goes on retrying them (franz-go retries without limit by
// default). The relay remembers them per seqbox partition, so the next
// call for that partition waits for those records instead of producing
// them again: a broker that is down for a minute costs waiting, not a
// pile of copies. It remembers confirmed records too, until the next call
// for the partition, so a lost seqbox ack (the ack's commit failed) does
// not produce them again either. What it keeps is each record's outcome,
// not its payload: at most about a batch per partition.
//
// What the relay cannot see is a process that died after Kafka confirmed
// a batch and before seqbox committed its ack: the next process produces
// the batch again. Every record carries its seqbox message id in the
// seqbox-id header, the same on every produce: consumers drop what they
// have seen (an idempotent consumer keyed on it). Kafka itself has no
// idempotency key that outlives a producer, so this is at-least-once,
// with duplicates detectable.
//
// Order across a refused record: franz-go fails every record buffered
// behind a record Kafka refuses (a non-retryable error) in the same Kafka
// partition, and the relay stops handing the batch's records to the
// client once one has failed, so the retry produces them again after the
// refused one. A later record of the batch can still land before a
// refused one in two cases: a record the client refuses on its own (one
// larger than ProducerBatchMaxBytes, which fails the same way on every
// retry until it is dead-lettered), and a refusal that lands while the
// batch is still being handed to the client. Config.Transactional rules
// both out for read_committed consumers.
//
// # Client configurations
//
// Handler refuses a client whose settings break the promises above:
// acks=0 (NoAck: nothing is confirmed), idempotency disabled with more
// than one produce request in flight per broker (a retried request can
// land after the one that followed it), and manual flushing (nothing is
// sent until someone flushes). Options that make the client give up on
// records (RecordRetries, RecordDeliveryTimeout, and
// AllowIdempotentProduceCancellation, which lets those fail records
// already sent) are allowed, but each failure they cause is a chance for
// the out-of-order case above: leave them at their defaults.
// LeaderAck (acks=1) confirms a record that a leader failover can still
// lose: the relay acks it all the same, so use the default (all in-sync
// replicas) for a relay. A client that lingers before sending (franz-go's
// default ProducerLinger is 10 ms) does not while a relay call waits for
// its records: the call runs a Flush meanwhile, which stops lingering for
// every producer of the client, and cancels it when done.
//
// # Transactions
//
// With Config.Transactional, each batch is produced in a Kafka transaction
// and committed before it is acked: read_committed consumers see a batch
// whole or not at all, and never a record of an aborted attempt. A batch
// whose record Kafka refuses is aborted, and its prefix before that record
// is produced again in a new transaction and acked, so the partition
// retries (and counts attempts against) the refused message itself.
//
// Transactions do not remove the crash duplicate: a process that dies
// after Kafka committed a batch and before seqbox acked it leaves a
// committed batch that the next process produces and commits again.
// Consumers still drop repeats by seqbox-id. What transactions add is
// all-or-nothing batches and strict order under refusals, at a cost: one
// transaction at a time per client (the relay's partitions take turns), a
// commit round trip to the transaction coordinator per batch, and
// read_committed consumers that wait for open transactions. Give each
// relay process its own kgo.TransactionalID, the same across its
// restarts: Kafka then aborts what a dead predecessor left open as soon
// as the new process starts (otherwise read_committed consumers of those
// partitions wait for the transaction timeout), and of two live processes
// sharing one, the older is fenced off. The client is the relay's alone:
// nothing else may produce with it. The README.md next to this file has
// the measured cost.
//
// It is its own Go module, so that the core does not depend on franz-go.
package kafkarelay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/relay/relaykit"
)

// Headers the relay sets on every record, besides the message's own
// headers (copied as they are, trace context included; a message header
// of one of these names is replaced).
const (
	HeaderID          = "seqbox-id" // the seqbox message id: consumers drop repeats by it
	HeaderQueue       = "seqbox-queue"
	HeaderPartition   = "seqbox-partition"
	HeaderSeq         = "seqbox-seq"
	HeaderKey         = "seqbox-key" // when the message has a key
	HeaderPayloadType = "seqbox-payload-type"
)

// Config is a relay's configuration.
type Config struct {
	// Client produces; required. Its partitioner picks each record's Kafka
	// partition from the record key. See the package doc for the settings
	// Handler refuses.
	Client *kgo.Client
	// Topic is the topic a delivery is produced to; required. See Topic.
	Topic func(d processor.Delivery) string
	// Key is a delivery's record key (nil: no key). Defaults to ByKey.
	Key func(d processor.Delivery) []byte
	// Transactional produces each batch in a Kafka transaction (see the
	// package doc); the client must have a kgo.TransactionalID, and a
	// client with one needs this set.
	Transactional bool
	// ContextHeaders, when set, adds the headers it returns for the handler's
	// context to every message, over the message's own: with
	// seqboxotel.EnqueueHeaders() the broker's consumers continue the trace
	// from the relay's consumer span instead of the enqueuing one.
	ContextHeaders func(ctx context.Context, queue string) map[string]string
}

// Topic returns a Config.Topic that produces every delivery to name.
func Topic(name string) func(d processor.Delivery) string {
	return func(processor.Delivery) string { return name }
}

// ByKey keys a record by the message's key, and gives a keyless message
// no key (the partitioner then spreads such records over the partitions).
func ByKey(d processor.Delivery) []byte {
	if d.Key == "" {
		return nil
	}
	return []byte(d.Key)
}

// ByPartition keys a record by its seqbox queue and partition
// ("orders/3"): each seqbox partition maps to one Kafka partition, so
// Kafka keeps its whole order, keyless messages included.
func ByPartition(d processor.Delivery) []byte {
	return []byte(d.Queue + "/" + strconv.Itoa(d.Partition))
}

// ErrConfig matches a Config that cannot work.
var ErrConfig = errors.New("kafkarelay: invalid config")

// Handler returns the relay as a leased batch handler for a queue.
func Handler(cfg Config) (processor.Handler, error) {
	fn, err := batchFunc(cfg)
	if err != nil {
		return nil, err
	}
	return processor.LeasedBatch(fn), nil
}

// batchFunc returns the relay's batch function for cfg.
func batchFunc(cfg Config) (func(context.Context, *processor.Batch) error, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	if cfg.Key == nil {
		cfg.Key = ByKey
	}
	r := &relay{cfg: cfg, flights: map[slot]map[int64]*flight{}, txTurn: make(chan struct{}, 1)}
	linger, _ := cfg.Client.OptValue(kgo.ProducerLinger).(time.Duration)
	r.lingers = linger > 0
	if cfg.Transactional {
		return r.publishTx, nil
	}
	return r.publish, nil
}

// check refuses a Config, and client settings, that break the relay's
// promises (see the package doc).
func check(cfg Config) error {
	switch {
	case cfg.Client == nil:
		return fmt.Errorf("%w: Client is nil", ErrConfig)
	case cfg.Topic == nil:
		return fmt.Errorf("%w: Topic is nil", ErrConfig)
	}
	cl := cfg.Client
	if acks, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); acks == kgo.NoAck() {
		return fmt.Errorf("%w: the client produces with acks=0 (NoAck), so nothing it produces is confirmed", ErrConfig)
	}
	if manual, _ := cl.OptValue(kgo.ManualFlushing).(bool); manual {
		return fmt.Errorf("%w: the client flushes manually, so the relay's records would wait for someone else's Flush", ErrConfig)
	}
	noIdempotency, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool)
	inflight, _ := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker).(int)
	if noIdempotency && inflight > 1 {
		return fmt.Errorf("%w: idempotency is disabled with %d produce requests in flight per broker, so a retried request can "+
			"land after the one that followed it: keep idempotency (the default) or MaxProduceRequestsInflightPerBroker(1)", ErrConfig, inflight)
	}
	txn := cl.OptValues(kgo.TransactionalID)
	transactional := len(txn) == 2 && txn[1] == true
	switch {
	case cfg.Transactional && !transactional:
		return fmt.Errorf("%w: Transactional needs a client with a kgo.TransactionalID", ErrConfig)
	case !cfg.Transactional && transactional:
		return fmt.Errorf("%w: the client has a TransactionalID: set Transactional (a transactional client produces nothing outside a transaction)", ErrConfig)
	}
	return nil
}

// slot is a seqbox partition, whose records the relay remembers.
type slot struct {
	queue     string
	partition int
}

// flight is one produced record's outcome: err is set before done closes.
type flight struct {
	id   processor.MessageID
	done chan struct{}
	err  error
}

// usable tells whether the record needs no new produce: it is still with
// the client, or was confirmed.
func (f *flight) usable() bool {
	select {
	case <-f.done:
		return f.err == nil
	default:
		return true
	}
}

// confirmed tells whether the record was confirmed (committed, in a
// transaction).
func (f *flight) confirmed() bool {
	select {
	case <-f.done:
		return f.err == nil
	default:
		return false
	}
}

type relay struct {
	cfg     Config
	lingers bool // the client waits (ProducerLinger) before sending records

	mu      sync.Mutex // guards flights
	flights map[slot]map[int64]*flight

	txTurn  chan struct{} // holds a token while a call runs a transaction: one at a time; guards txDirty
	txDirty bool          // a transaction may be open: abort it before the next
}

// Record is the Kafka record a delivery is produced as (key nil: no key).
func Record(d processor.Delivery, topic string, key []byte) *kgo.Record {
	own := slices.Sorted(maps.Keys(d.Headers))
	headers := make([]kgo.RecordHeader, 0, len(own)+6)
	for _, k := range own {
		switch k {
		case HeaderID, HeaderQueue, HeaderPartition, HeaderSeq, HeaderKey, HeaderPayloadType:
			continue // the relay's own, set below
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(d.Headers[k])})
	}
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderID, Value: []byte(d.ID.String())},
		kgo.RecordHeader{Key: HeaderQueue, Value: []byte(d.Queue)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.Itoa(d.Partition))},
		kgo.RecordHeader{Key: HeaderSeq, Value: []byte(strconv.FormatInt(d.Seq, 10))},
		kgo.RecordHeader{Key: HeaderPayloadType, Value: []byte(d.PayloadType)})
	if d.Key != "" {
		headers = append(headers, kgo.RecordHeader{Key: HeaderKey, Value: []byte(d.Key)})
	}
	return &kgo.Record{Topic: topic, Key: key, Value: d.Payload, Headers: headers, Timestamp: d.EnqueuedAt}
}

// produce hands msgs to the client in order, reusing what reuse holds for
// a message (its earlier record, still with the client or confirmed),
// and returns each message's flight. It stops early, with the reason,
// once ctx is done or a record it produced has failed: the rest waits
// for the retry, behind the failed one.
func (r *relay) produce(ctx context.Context, msgs []processor.Delivery, reuse map[int64]*flight) ([]*flight, error) {
	flights := make([]*flight, 0, len(msgs))
	recCtx := context.WithoutCancel(ctx) // a record is never failed for the call's deadline: see the package doc
	var failed atomic.Bool
	for _, d := range msgs {
		if f := reuse[d.Seq]; f != nil && f.id == d.ID && f.usable() {
			flights = append(flights, f)
			continue
		}
		if err := ctx.Err(); err != nil {
			return flights, fmt.Errorf("kafkarelay: produce seq %d: %w", d.Seq, err)
		}
		if failed.Load() {
			return flights, nil // the failure is among flights
		}
		f := &flight{id: d.ID, done: make(chan struct{})}
		rec := Record(d, r.cfg.Topic(d), r.cfg.Key(d))
		rec.Context = recCtx
		r.cfg.Client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(true)
			}
			f.err = err
			close(f.done)
		})
		flights = append(flights, f)
	}
	return flights, nil
}

// publish produces the batch and acks the confirmed prefix; the first
// failure ends the call with its error, so the partition retries from
// there.
func (r *relay) publish(ctx context.Context, b *processor.Batch) error {
	if len(b.Messages) == 0 {
		return nil
	}
	msgs := relaykit.WithContextHeaders(ctx, r.cfg.ContextHeaders, b.Messages)
	s := slot{b.Messages[0].Queue, b.Messages[0].Partition}
	prev := r.take(s)
	flights, sendErr := r.produce(ctx, msgs, prev)
	defer r.keep(s, msgs, flights, prev)
	if r.lingers {
		// The client lingers (10 ms by default) before it sends a
		// partition's records, in case more come; a relay waiting for its
		// records gains nothing from that. A Flush keeps the client from
		// lingering while it runs (for every producer of the client), and
		// is cancelled once this call is done: the call waits for its own
		// records, not for everything the client holds.
		flushCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = r.cfg.Client.Flush(flushCtx) }()
	}
	for i, f := range flights {
		select {
		case <-f.done:
			if f.err != nil {
				return fmt.Errorf("kafkarelay: seq %d not confirmed: %w", b.Messages[i].Seq, f.err)
			}
			b.Ack(i + 1)
		case <-ctx.Done():
			return fmt.Errorf("kafkarelay: seq %d not confirmed: %w", b.Messages[i].Seq, ctx.Err())
		}
	}
	return sendErr
}

// take removes and returns what the relay remembers of a partition.
func (r *relay) take(s slot) map[int64]*flight {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.flights[s]
	delete(r.flights, s)
	return prev
}

// keep remembers a call's records for the partition's next call, and
// those of earlier calls that still need no new produce (a call that
// stopped early did not reach them). The next call starts at the first
// unacked message, so what comes before this batch is dropped.
func (r *relay) keep(s slot, msgs []processor.Delivery, flights []*flight, prev map[int64]*flight) {
	next := make(map[int64]*flight, len(flights))
	for seq, f := range prev {
		if seq >= msgs[0].Seq && f.usable() {
			next[seq] = f
		}
	}
	for i, f := range flights {
		next[msgs[i].Seq] = f
	}
	if len(next) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flights[s] = next
}

// publishTx produces the batch in a transaction and acks it once
// committed. When a record fails, the transaction is aborted and the
// prefix before it committed in a new one, so the partition retries the
// failed message itself. A leading run the relay committed before (its
// ack was lost) is acked without producing it again.
func (r *relay) publishTx(ctx context.Context, b *processor.Batch) error {
	if len(b.Messages) == 0 {
		return nil
	}
	msgs := relaykit.WithContextHeaders(ctx, r.cfg.ContextHeaders, b.Messages)
	s := slot{b.Messages[0].Queue, b.Messages[0].Partition}
	committed := 0
	prev := r.take(s)
	for _, d := range msgs {
		if f := prev[d.Seq]; f == nil || f.id != d.ID || !f.confirmed() {
			break
		}
		committed++
	}
	b.Ack(committed)
	msgs = msgs[committed:]
	if len(msgs) == 0 {
		return nil
	}
	select {
	case r.txTurn <- struct{}{}:
		defer func() { <-r.txTurn }()
	case <-ctx.Done():
		return fmt.Errorf("kafkarelay: waiting for the transaction of another partition: %w", ctx.Err())
	}
	if r.txDirty {
		if err := r.abort(ctx); err != nil {
			return fmt.Errorf("kafkarelay: abort the transaction left open: %w", err)
		}
	}
	flights, failedAt, err := r.transact(ctx, msgs)
	if err == nil {
		b.Ack(committed + len(msgs))
		r.keep(s, msgs, flights, nil)
		return nil
	}
	if failedAt > 0 && !r.txDirty {
		if flights, _, perr := r.transact(ctx, msgs[:failedAt]); perr == nil {
			b.Ack(committed + failedAt)
			r.keep(s, msgs, flights, nil)
		}
	}
	return err
}

// transact runs one transaction of msgs. It returns their records once
// they are committed; otherwise the index of the first message not
// produced (0 when the failure was not a record's) and why, having
// aborted the transaction, or left txDirty set when it could not.
func (r *relay) transact(ctx context.Context, msgs []processor.Delivery) ([]*flight, int, error) {
	cl := r.cfg.Client
	if err := cl.BeginTransaction(); err != nil {
		r.txDirty = true
		return nil, 0, fmt.Errorf("kafkarelay: begin transaction: %w", err)
	}
	r.txDirty = true
	flights, sendErr := r.produce(ctx, msgs, nil)
	if err := cl.Flush(ctx); err != nil {
		return nil, 0, fmt.Errorf("kafkarelay: flush: %w", err) // records still with the client: the next call aborts
	}
	failedAt, failure := len(flights), sendErr
	for i, f := range flights {
		<-f.done // flushed: every promise has run
		if f.err != nil {
			failedAt, failure = i, fmt.Errorf("kafkarelay: seq %d not confirmed: %w", msgs[i].Seq, f.err)
			break
		}
	}
	if failure != nil {
		if err := r.abort(ctx); err != nil {
			return nil, 0, errors.Join(failure, fmt.Errorf("kafkarelay: abort: %w", err))
		}
		return nil, failedAt, failure
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// The commit's outcome may be unknown: abort (franz-go's recovery
		// for it); a batch that did commit is produced again, as after a
		// crash.
		if aerr := r.abort(ctx); aerr != nil {
			err = errors.Join(err, fmt.Errorf("kafkarelay: abort: %w", aerr))
		}
		return nil, 0, fmt.Errorf("kafkarelay: commit: %w", err)
	}
	r.txDirty = false
	return flights, len(msgs), nil
}

// abort ends the open transaction, if any, without committing it.
func (r *relay) abort(ctx context.Context) error {
	if err := r.cfg.Client.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	if err := r.cfg.Client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return err
	}
	r.txDirty = false
	return nil
}
