package kafkarelay_test

import (
	"context"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	kafkarelay "github.com/seqbox/seqbox/relay/kafka"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// The tests run against kfake, franz-go's in-process Kafka cluster: no
// Kafka broker can be installed on the machines this repository is
// tested on (README.md in this directory).

const (
	topic      = "orders"
	partitions = 3 // the topic's Kafka partitions; the seqbox queue has 4
)

// newCluster starts a kfake cluster (3 brokers unless opts say otherwise)
// with the topic, closed when the test ends.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.SeedTopics(partitions, topic)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newClient connects to addrs, retrying quickly: franz-go's default
// backoff (up to seconds) would only slow the tests down.
func newClient(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// setup starts a cluster and opens an embedded database.
func setup(t testing.TB, opts ...kfake.Opt) (context.Context, *kfake.Cluster, *bun.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, newCluster(t, opts...), relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
}

// start runs relay h on queue "orders" (4 partitions) of db with options
// for quick retries, stopped when the test ends.
func start(ctx context.Context, t testing.TB, db *bun.DB, h processor.Handler, opts ...processor.QueueOption) *seqbox.Outbox {
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, append([]processor.QueueOption{processor.BatchSize(50),
			processor.Retry(time.Millisecond, 5*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)}, opts...)...).
		Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	return ob
}

// read returns every record of the topic, partition by partition in offset
// order, as a consumer with the isolation level sees them. It first
// appends a marker record to each partition and reads until it has every
// marker, so it knows it has read everything before them.
func read(ctx context.Context, t testing.TB, addrs []string, committed bool) []*kgo.Record {
	t.Helper()
	mark := strconv.FormatUint(rand.Uint64(), 36)
	producer := newClient(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(partitions) {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Headers: []kgo.RecordHeader{{Key: "marker", Value: []byte(mark)}}}).FirstErr())
	}
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	consumer := newClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	byPartition := make([][]*kgo.Record, partitions)
	done := make([]bool, partitions)
	for slices.Contains(done, false) {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading the topic")
		for _, err := range fetches.Errors() {
			require.NoError(t, err.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			switch {
			case done[r.Partition]:
				t.Fatalf("partition %d: a record past the marker", r.Partition)
			case len(r.Headers) == 1 && r.Headers[0].Key == "marker": // this read's, or an earlier one's
				done[r.Partition] = string(r.Headers[0].Value) == mark
			default:
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
			}
		})
	}
	return slices.Concat(byPartition...)
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkTopic: every id of relaytest.Enqueue (to a queue of that many
// partitions; a zero id is a message that must not arrive) arrived, with its fields
// mapped; each key's records are in the Kafka partition the default
// partitioner picks for it, the first arrival of each message in seq
// order; a repeat (same id) is the same message. It returns how many
// arrivals were repeats.
func checkTopic(t *testing.T, recs []*kgo.Record, ids []outbox.MessageID, queuePartitions int) int {
	t.Helper()
	partitioner := kgo.StickyKeyPartitioner(nil).ForTopic(topic) // murmur2 of the key, as the default partitioner for a keyed record
	seen := map[string]bool{}
	lastSeq := map[string]int64{} // by key
	repeats := 0
	for _, r := range recs {
		n, err := strconv.Atoi(string(r.Value)) // message n of relaytest.Enqueue, id ids[n]
		require.NoError(t, err)
		id := header(r, kafkarelay.HeaderID)
		require.NotZero(t, ids[n], "message %d must not arrive", n)
		require.Equal(t, ids[n].String(), id)
		key := "customer-" + strconv.Itoa(n%7)
		require.Equal(t, key, string(r.Key))
		require.Equal(t, int32(partitioner.Partition(r, partitions)), r.Partition, "key %s in the partitioner's partition", key)
		if seen[id] {
			repeats++
			continue
		}
		seen[id] = true
		seq, err := strconv.ParseInt(header(r, kafkarelay.HeaderSeq), 10, 64)
		require.NoError(t, err)
		require.Greater(t, seq, lastSeq[key], "key %s out of order", key)
		lastSeq[key] = seq
		require.Equal(t, "orders", header(r, kafkarelay.HeaderQueue))
		require.Equal(t, strconv.Itoa(outbox.PartitionForKey(key, queuePartitions)), header(r, kafkarelay.HeaderPartition))
		require.Equal(t, key, header(r, kafkarelay.HeaderKey))
		require.Equal(t, "order.v1", header(r, kafkarelay.HeaderPayloadType))
		require.Equal(t, strconv.Itoa(n), header(r, "n"), "the message's own headers")
		require.Equal(t, "00-abc-def-01", header(r, "traceparent"))
		require.WithinDuration(t, time.Now(), r.Timestamp, time.Minute, "the enqueue time")
	}
	want := 0
	for _, id := range ids {
		if id != (outbox.MessageID{}) {
			want++
		}
	}
	require.Len(t, seen, want)
	return repeats
}

// TestRelayOnceAcrossLostAcks: a queue relayed to a topic arrives whole,
// each key in its partitioner's partition and in seq order, fields mapped.
// Every other batch's ack is lost after the produce (as when the ack's
// commit fails) and the batch handed to the relay again: the relay
// remembers what Kafka confirmed and produces nothing twice.
func TestRelayOnceAcrossLostAcks(t *testing.T) { testOnceAcrossLostAcks(t, false) }

// testOnceAcrossLostAcks relays a queue with every other batch's ack lost
// after the produce (or the transaction's commit) and checks the topic, as
// a read_committed consumer when transactional, holds each message once.
func testOnceAcrossLostAcks(t *testing.T, transactional bool) {
	t.Parallel()
	ctx, c, db := setup(t)
	h := handler(t, c, transactional)
	var repeated atomic.Int64
	ob := start(ctx, t, db, h, processor.Use(relaytest.PublishTwice(&repeated)))
	ids := relaytest.Enqueue(ctx, t, ob, db, 300)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Positive(t, repeated.Load())
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), transactional), ids, 4), "nothing produced twice")
}

// TestRelayRefusedRecordRetried: Kafka refuses a produce request to one
// partition (a non-retryable error): the relay acks the prefix before the
// first refused message and the partition retries from there; every
// message arrives once, each key in seq order.
func TestRelayRefusedRecordRetried(t *testing.T) { testRefusedRecordRetried(t, false) }

// testRefusedRecordRetried has Kafka refuse two produce requests to one
// partition and checks the partition retried and the topic, as a
// read_committed consumer when transactional, holds each message once.
func testRefusedRecordRetried(t *testing.T, transactional bool) {
	t.Parallel()
	ctx, c, db := setup(t)
	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 2})
	ob := start(ctx, t, db, handler(t, c, transactional))
	ids := relaytest.Enqueue(ctx, t, ob, db, 300)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Equal(t, 2, fault.Hits())
	require.Positive(t, ob.Counters().Retried)
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), transactional), ids, 4), "each message once")
}

// handler is the relay to the test topic on cluster c: idempotent, or
// transactional with a transactional ID of its own.
func handler(t *testing.T, c *kfake.Cluster, transactional bool) processor.Handler {
	t.Helper()
	cfg := kafkarelay.Config{Client: newClient(t, c.ListenAddrs()), Topic: kafkarelay.Topic(topic)}
	if transactional {
		cfg = kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), kgo.TransactionalID("relay")), Topic: kafkarelay.Topic(topic), Transactional: true}
	}
	h, err := kafkarelay.Handler(cfg)
	require.NoError(t, err)
	return h
}

// TestRelayRetriesUntilTheTopicExists: while the topic does not exist,
// franz-go fails the records (UNKNOWN_TOPIC_OR_PARTITION) and the
// partitions retry with backoff, skipping nothing; once it exists,
// everything arrives, once and in order.
func TestRelayRetriesUntilTheTopicExists(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := kfake.NewCluster() // no topic
	require.NoError(t, err)
	t.Cleanup(c.Close)
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
	cl := newClient(t, c.ListenAddrs(), kgo.UnknownTopicRetries(1))
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic(topic)})
	require.NoError(t, err)
	ob := start(ctx, t, db, h)
	ids := relaytest.Enqueue(ctx, t, ob, db, 100)
	require.Eventually(t, func() bool { return ob.Counters().Retried >= 4 }, time.Minute, 10*time.Millisecond, "partitions retry")
	require.Zero(t, ob.Counters().Delivered)
	_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), false), ids, 4))
}

// TestRelayKeys: a keyless message has no record key by default (the
// partitioner spreads such records); with ByPartition every record is
// keyed "queue/partition", so each seqbox partition lands in one Kafka
// partition in seq order.
func TestRelayKeys(t *testing.T) {
	t.Parallel()
	ctx, c, db := setup(t)
	cl := newClient(t, c.ListenAddrs())
	for _, byPartition := range []bool{false, true} {
		cfg := kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic(topic)}
		if byPartition {
			cfg.Key = kafkarelay.ByPartition
		}
		h, err := kafkarelay.Handler(cfg)
		require.NoError(t, err)
		queue := "keyless" + strconv.FormatBool(byPartition)
		ob, err := seqbox.New(db).Migrate(true).Queue(queue, 4, h, processor.BatchSize(10)).Start(ctx)
		require.NoError(t, err)
		msgs := make([]outbox.Message, 100)
		for i := range msgs {
			msgs[i] = outbox.Message{Partition: i % 4, PayloadType: "t", Payload: []byte(strconv.Itoa(i))}
		}
		ids, err := ob.EnqueueBatch(ctx, db, queue, msgs)
		require.NoError(t, err)
		require.NoError(t, ob.WaitProcessed(ctx, ids...))
		require.NoError(t, ob.Stop(ctx))
	}
	kafkaPartition := map[string]int32{} // seqbox partition → Kafka partition, with ByPartition
	lastSeq := map[string]int64{}
	byPartition := 0
	for _, r := range read(ctx, t, c.ListenAddrs(), false) {
		part := header(r, kafkarelay.HeaderPartition)
		require.Empty(t, header(r, kafkarelay.HeaderKey))
		if header(r, kafkarelay.HeaderQueue) == "keylessfalse" {
			require.Nil(t, r.Key, "no key")
			continue
		}
		byPartition++
		require.Equal(t, "keylesstrue/"+part, string(r.Key))
		if p, ok := kafkaPartition[part]; ok {
			require.Equal(t, p, r.Partition, "seqbox partition %s in one Kafka partition", part)
		}
		kafkaPartition[part] = r.Partition
		seq, err := strconv.ParseInt(header(r, kafkarelay.HeaderSeq), 10, 64)
		require.NoError(t, err)
		require.Equal(t, lastSeq[part]+1, seq, "seqbox partition %s in seq order, once", part)
		lastSeq[part] = seq
	}
	require.Equal(t, 100, byPartition)
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	for name, cfg := range map[string]kafkarelay.Config{
		"no client": {Topic: kafkarelay.Topic(topic)},
		"no topic":  {Client: newClient(t, addrs)},
		"acks=0": {Client: newClient(t, addrs, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck())),
			Topic: kafkarelay.Topic(topic)},
		"not idempotent, 2 in flight": {Client: newClient(t, addrs, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(2)),
			Topic: kafkarelay.Topic(topic)},
		"manual flushing":                     {Client: newClient(t, addrs, kgo.ManualFlushing()), Topic: kafkarelay.Topic(topic)},
		"Transactional without a txn id":      {Client: newClient(t, addrs), Topic: kafkarelay.Topic(topic), Transactional: true},
		"a txn id without Transactional":      {Client: newClient(t, addrs, kgo.TransactionalID("x")), Topic: kafkarelay.Topic(topic)},
		"Transactional, but manual flushing":  {Client: newClient(t, addrs, kgo.TransactionalID("y"), kgo.ManualFlushing()), Topic: kafkarelay.Topic(topic), Transactional: true},
		"not idempotent, 3 in flight, acks=1": {Client: newClient(t, addrs, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(3), kgo.RequiredAcks(kgo.LeaderAck())), Topic: kafkarelay.Topic(topic)},
	} {
		_, err := kafkarelay.Handler(cfg)
		require.ErrorIs(t, err, kafkarelay.ErrConfig, name)
	}
	// Not idempotent with one request in flight keeps order (a retry may
	// write a duplicate, which consumers drop by id): accepted.
	_, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, addrs, kgo.DisableIdempotentWrite()), Topic: kafkarelay.Topic(topic)})
	require.NoError(t, err)
}

// TestContextHeaders: headers from the handler's context (the relay's
// consumer span, with seqboxotel) replace the message's own of that name.
func TestContextHeaders(t *testing.T) {
	t.Parallel()
	ctx, c, db := setup(t)
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs()), Topic: kafkarelay.Topic(topic),
		ContextHeaders: func(context.Context, string) map[string]string { return map[string]string{"traceparent": "00-relay"} }})
	require.NoError(t, err)
	ob := start(ctx, t, db, h)
	ids := relaytest.Enqueue(ctx, t, ob, db, 3)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	recs := read(ctx, t, c.ListenAddrs(), false)
	require.Len(t, recs, 3)
	for _, r := range recs {
		require.Equal(t, "00-relay", header(r, "traceparent"))
		require.Equal(t, string(r.Value), header(r, "n"))
	}
}

// advertise is a broker's listener that tells clients to connect to
// another address (a relaytest.Proxy in front of it).
type advertise struct {
	net.Listener
	addr net.Addr
}

func (a advertise) Addr() net.Addr { return a.addr }

// behindProxy starts a one-broker cluster that advertises a proxy in front
// of it as its address, so every client connection goes through the proxy.
func behindProxy(t *testing.T) (context.Context, *kfake.Cluster, *bun.DB, *relaytest.Proxy) {
	var proxy *relaytest.Proxy
	ctx, c, db := setup(t, kfake.NumBrokers(1), kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		proxy = relaytest.NewProxy(t, ln.Addr().String())
		addr, err := net.ResolveTCPAddr("tcp", proxy.Addr())
		return advertise{ln, addr}, err
	}))
	require.Equal(t, []string{proxy.Addr()}, c.ListenAddrs(), "clients connect through the proxy")
	return ctx, c, db, proxy
}

// TestRelayBrokerDown: the broker goes away mid-stream (every connection
// cut, new ones refused, by a proxy the broker advertises as its address):
// partitions retry with backoff and skip nothing, and the records the
// client still holds are produced once it is back. The relay waits for
// them instead of producing them again, and the idempotent producer's
// retries are written once: the topic holds every message exactly once.
func TestRelayBrokerDown(t *testing.T) {
	t.Parallel()
	ctx, c, db, proxy := behindProxy(t)
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs()), Topic: kafkarelay.Topic(topic)})
	require.NoError(t, err)
	ids := relaytest.BrokerDown(ctx, t, db, h, proxy, 300)
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), false), ids, 2), "nothing produced twice")
}

// TestTransactionalBrokerDown: the same with the transactional relay. A
// transaction cut off by the outage is aborted by the next call, once the
// broker answers; a read_committed consumer gets every message, each
// key's first arrivals in order (a commit whose answer was lost may have
// happened: that batch is committed again).
func TestTransactionalBrokerDown(t *testing.T) {
	t.Parallel()
	ctx, c, db, proxy := behindProxy(t)
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), kgo.TransactionalID("relay")),
		Topic: kafkarelay.Topic(topic), Transactional: true})
	require.NoError(t, err)
	ids := relaytest.BrokerDown(ctx, t, db, h, proxy, 300)
	repeats := checkTopic(t, read(ctx, t, c.ListenAddrs(), true), ids, 2)
	t.Logf("%d repeats", repeats)
}

// TestRelayBrokerRestart: the broker process stops mid-stream and a new
// one starts on the same port from the same data directory (kfake keeps
// its logs and producer state there). Partitions retry meanwhile; the
// relay and its client go on without a restart, and the topic holds every
// message exactly once.
func TestRelayBrokerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, c, db := setup(t, kfake.NumBrokers(1), kfake.DataDir(dir))
	addrs := c.ListenAddrs()
	_, port, err := net.SplitHostPort(addrs[0])
	require.NoError(t, err)
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, addrs), Topic: kafkarelay.Topic(topic)})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).Queue("orders", 2, h, relaytest.RelayOptions()...).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 300)
	require.Eventually(t, func() bool { return ob.Counters().Delivered > 0 }, time.Minute, 5*time.Millisecond)
	c.Close()
	retried := ob.Counters().Retried
	require.Eventually(t, func() bool { return ob.Counters().Retried >= retried+2 }, time.Minute, 5*time.Millisecond, "partitions retry")
	require.Less(t, ob.Counters().Delivered, int64(len(ids)), "all delivered before the broker stopped: nothing tested")
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	c2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir), kfake.Ports(p))
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Zero(t, checkTopic(t, read(ctx, t, addrs, false), ids, 2), "nothing produced twice")
}

// TestLeadersMove: every other handler call moves each of the topic's
// partitions to another broker (a leader election, as when a broker of a
// cluster fails over) before producing. The client retries what the old
// leader refused (NOT_LEADER_OR_FOLLOWER) on the new one; the idempotent
// producer keeps each partition's order across those retries and writes
// nothing twice, with the transactional relay too.
func TestLeadersMove(t *testing.T) {
	t.Parallel()
	for _, transactional := range []bool{false, true} {
		t.Run("transactional="+strconv.FormatBool(transactional), func(t *testing.T) {
			ctx, c, db := setup(t)
			var opts []kgo.Opt
			if transactional {
				opts = append(opts, kgo.TransactionalID("relay"))
			}
			h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), opts...),
				Topic: kafkarelay.Topic(topic), Transactional: transactional})
			require.NoError(t, err)
			var calls, moves atomic.Int64
			move := func(ctx context.Context, _ *processor.Call, next func(context.Context) error) error {
				if calls.Add(1)%2 == 0 {
					for p := range int32(partitions) {
						if err := c.MoveTopicPartition(topic, p, (c.LeaderFor(topic, p)+1)%3); err != nil {
							return err
						}
					}
					moves.Add(1)
				}
				return next(ctx)
			}
			ob := start(ctx, t, db, h, processor.Use(move), processor.BatchSize(20))
			ids := relaytest.Enqueue(ctx, t, ob, db, 300)
			require.NoError(t, ob.WaitProcessed(ctx, ids...))
			require.GreaterOrEqual(t, moves.Load(), int64(4))
			require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), transactional), ids, 4), "nothing produced twice")
		})
	}
}

// TestRelayDoesNotWaitForLinger: a client that lingers a minute (the most
// franz-go allows) before sending a partition's records (ProducerLinger)
// still relays at once: a relay call waiting for its records keeps the
// client from lingering.
func TestRelayDoesNotWaitForLinger(t *testing.T) {
	t.Parallel()
	_, c, db := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the linger would outlast it
	defer cancel()
	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), kgo.ProducerLinger(time.Minute)), Topic: kafkarelay.Topic(topic)})
	require.NoError(t, err)
	ob := start(ctx, t, db, h)
	ids := relaytest.Enqueue(ctx, t, ob, db, 20)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), false), ids, 4))
}
