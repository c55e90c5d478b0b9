package kafkarelay_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	kafkarelay "github.com/seqbox/seqbox/relay/kafka"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// BenchmarkRelay measures, in one run against one kfake cluster (in this
// process, so the broker's work shares the CPU with the relay's), the relay
// draining a backlog of relayMessages from an embedded (SQLite) outbox
// into a topic, the same drain with a handler that does nothing, and a
// plain loop producing the same records with the same client (every
// result awaited): relay_msgs/s, plain_msgs/s, relay/plain and
// relay/noop_handler (the outbox's own share of the cost).
func BenchmarkRelay(b *testing.B) {
	const relayMessages = 20000
	ctx, c, db := setup(b)
	cl := newClient(b, c.ListenAddrs())
	require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Topic: topic}).FirstErr()) // metadata and connections, untimed
	msgs := relaytest.BenchMessages(relayMessages)
	var relayTime, plainTime, noopTime time.Duration
	for i := range b.N {
		queue := "q" + strconv.Itoa(i)
		h, err := kafkarelay.Handler(kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic(topic)})
		require.NoError(b, err)
		relayTime += relaytest.Drain(ctx, b, db, queue, msgs, h)
		noopTime += relaytest.Drain(ctx, b, db, queue+"noop", msgs, relaytest.NoopHandler())

		began := time.Now()
		done := make(chan error, len(msgs))
		for j, m := range msgs {
			d := processor.Delivery{ID: outbox.MessageID{byte(i), byte(j >> 8), byte(j), 1}, Queue: queue, Key: m.Key,
				Partition: j % 16, Seq: int64(j/16 + 1), PayloadType: m.PayloadType, Payload: m.Payload}
			cl.Produce(ctx, kafkarelay.Record(d, topic, kafkarelay.ByKey(d)), func(_ *kgo.Record, err error) { done <- err })
		}
		for range msgs {
			require.NoError(b, <-done)
		}
		plainTime += time.Since(began)
	}
	relaytest.Report(b, b.N*relayMessages, relayTime, plainTime, noopTime)
}

// BenchmarkTransactional measures what a transaction per batch costs
// against the idempotent producer, the producing alone (the relay's batch
// function called directly, no outbox around it): batches of 100 (the
// queue default) and 1,000 messages of 256 bytes over 64 keys, from one
// partition at a time and from 16 at once (each its own seqbox partition,
// as a queue's partitions run), to a one-broker kfake cluster reached
// directly (in this process: no network) and through a proxy that delays
// every write by 1 ms each way (a 2 ms round trip, as across a network).
// Each sub-benchmark reports msgs/s; compare idem and txn of the same
// batch, partitions and round trip. The broker shares the CPU with the
// relay.
func BenchmarkTransactional(b *testing.B) {
	for _, delay := range []time.Duration{0, time.Millisecond} {
		var opts []kfake.Opt
		if delay > 0 {
			opts = append(opts, kfake.ListenFn(delayedListener(b, delay)))
		}
		c := newCluster(b, append(opts, kfake.NumBrokers(1))...)
		idem := newClient(b, c.ListenAddrs())
		txn := newClient(b, c.ListenAddrs(), kgo.TransactionalID("bench"))
		for _, batch := range []int{100, 1000} {
			for _, parts := range []int{1, 16} {
				for _, transactional := range []bool{false, true} {
					mode, cl := "idem", idem
					if transactional {
						mode, cl = "txn", txn
					}
					name := fmt.Sprintf("rtt=%s/batch=%d/partitions=%d/%s", 2*delay, batch, parts, mode)
					b.Run(name, func(b *testing.B) { benchmarkBatches(b, cl, transactional, batch, parts) })
				}
			}
		}
	}
}

// benchmarkBatches times b.N rounds of parts partitions producing a batch
// each, at once, with a relay of its own, after one untimed round.
func benchmarkBatches(b *testing.B, cl *kgo.Client, transactional bool, batch, parts int) {
	ctx := context.Background()
	publish, err := kafkarelay.BatchFunc(kafkarelay.Config{Client: cl, Topic: kafkarelay.Topic(topic), Transactional: transactional})
	require.NoError(b, err)
	msgs := relaytest.BenchMessages(batch)
	round := func(r int) {
		errs := make(chan error, parts)
		for p := range parts {
			go func() {
				deliveries := make([]processor.Delivery, batch)
				for j, m := range msgs {
					seq := int64(r*batch + j + 1)
					deliveries[j] = processor.Delivery{ID: outbox.MessageID{byte(p), byte(seq >> 16), byte(seq >> 8), byte(seq)}, Queue: "orders",
						Partition: p, Key: m.Key, Seq: seq, PayloadType: m.PayloadType, Payload: m.Payload}
				}
				bt := &processor.Batch{Messages: deliveries}
				err := publish(ctx, bt)
				if err == nil && bt.Acked() != batch {
					err = fmt.Errorf("acked %d of %d", bt.Acked(), batch)
				}
				errs <- err
			}()
		}
		for range parts {
			require.NoError(b, <-errs)
		}
	}
	round(0) // connections, producer IDs
	b.ResetTimer()
	for r := range b.N {
		round(r + 1)
	}
	b.ReportMetric(float64(b.N*batch*parts)/b.Elapsed().Seconds(), "msgs/s")
}

// delayedListener is a kfake.ListenFn: the broker listens where kfake
// asks, and advertises a proxy in front of it that holds every chunk of
// bytes, each way, for delay before passing it on (latency without a
// bandwidth limit: chunks are pipelined).
func delayedListener(b *testing.B, delay time.Duration) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		front, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		b.Cleanup(func() { _ = front.Close() })
		go func() {
			for {
				client, err := front.Accept()
				if err != nil {
					return
				}
				broker, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					_ = client.Close()
					continue
				}
				go delayCopy(broker, client, delay)
				go delayCopy(client, broker, delay)
			}
		}()
		return advertise{ln, front.Addr()}, nil
	}
}

// delayCopy copies src to dst, each chunk delay after it was read.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		data []byte
		at   time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	for range chunks { // let the reader finish
	}
}
