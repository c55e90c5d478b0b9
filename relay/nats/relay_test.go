package natsrelay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	natsrelay "github.com/seqbox/seqbox/relay/nats"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

func natsURL() string {
	if u := os.Getenv("SEQBOX_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// setup connects to JetStream (skipping loudly, or failing under CI=true,
// when it cannot) and opens an embedded database; name is unique per test.
func setup(t testing.TB) (context.Context, jetstream.JetStream, *bun.DB, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.ReconnectBufSize(-1))
	if err != nil {
		relaytest.Unreachable(t, "NATS", "SEQBOX_NATS_URL", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	if _, err := js.AccountInfo(ctx); err != nil {
		relaytest.Unreachable(t, "NATS JetStream", "SEQBOX_NATS_URL", err)
	}
	return ctx, js, relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db")), fmt.Sprintf("sbt%d", rand.Uint64()%1e12)
}

func createStream(ctx context.Context, t testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return s
}

// stored reads every message of the stream, in stream order.
func stored(ctx context.Context, t *testing.T, s jetstream.Stream) []*nats.Msg {
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*nats.Msg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		out = append(out, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
	}
	return out
}

// checkStream: every id once, per partition in seq order, fields mapped.
func checkStream(t *testing.T, msgs []*nats.Msg, ids []outbox.MessageID, prefix string) {
	t.Helper()
	require.Len(t, msgs, len(ids), "each message stored once")
	seen := map[int]bool{}
	lastSeq := map[string]int64{}
	for _, m := range msgs {
		n, err := strconv.Atoi(string(m.Data)) // message n of relaytest.Enqueue, id ids[n]
		require.NoError(t, err)
		require.False(t, seen[n], "message %d stored twice", n)
		seen[n] = true
		require.Equal(t, ids[n].String(), m.Header.Get(natsrelay.HeaderMsgID))
		part := m.Header.Get(natsrelay.HeaderPartition)
		seq, err := strconv.ParseInt(m.Header.Get(natsrelay.HeaderSeq), 10, 64)
		require.NoError(t, err)
		require.Greater(t, seq, lastSeq[part], "partition %s out of order", part)
		lastSeq[part] = seq
		require.Equal(t, prefix+".orders", m.Subject)
		require.Equal(t, "order.v1", m.Header.Get(natsrelay.HeaderPayloadType))
		require.Equal(t, "customer-"+strconv.Itoa(n%7), m.Header.Get(natsrelay.HeaderKey))
		require.Equal(t, string(m.Data), m.Header.Get("n"), "the message's own headers")
		require.Equal(t, "00-abc-def-01", m.Header.Get("traceparent"))
	}
	require.Len(t, seen, len(ids))
}

// TestRelayOrderedOnceAcrossLostAcks: a queue relayed to a stream arrives
// whole, per partition in seq order, with its fields mapped. Batches are
// published and then their ack is lost (as when the process dies between
// the broker's confirm and seqbox's ack), so every batch is published
// again: the stream still holds each message once.
func TestRelayOrderedOnceAcrossLostAcks(t *testing.T) {
	ctx, js, db, name := setup(t)
	stream := createStream(ctx, t, js, name)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
	require.NoError(t, err)
	var repeated atomic.Int64
	loseAcks := relaytest.PublishTwice(&repeated)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, processor.Use(loseAcks), processor.BatchSize(50), processor.Retry(time.Millisecond, 5*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 500)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Positive(t, repeated.Load())
	checkStream(t, stored(ctx, t, stream), ids, name)
}

// TestRelayRetriesUntilTheStreamExists: while nothing accepts the subject
// (the broker side is down), partitions retry with backoff and lose or
// skip nothing; once the stream is there, everything arrives in order.
func TestRelayRetriesUntilTheStreamExists(t *testing.T) {
	ctx, js, db, name := setup(t)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 2, h, processor.Retry(20*time.Millisecond, 100*time.Millisecond), processor.MaxAttempts(processor.MaxAttemptsNever)).
		Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 100)
	require.Eventually(t, func() bool { return ob.Counters().Retried >= 4 }, time.Minute, 10*time.Millisecond, "partitions retry")
	require.Zero(t, ob.Counters().Delivered)
	stream := createStream(ctx, t, js, name)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	checkStream(t, stored(ctx, t, stream), ids, name)
}

// TestRelaySequential: the one-at-a-time mode delivers the same stream.
func TestRelaySequential(t *testing.T) {
	ctx, js, db, name := setup(t)
	stream := createStream(ctx, t, js, name)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix(name, false), Sequential: true})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 2, h).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 50)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	checkStream(t, stored(ctx, t, stream), ids, name)
}

func TestConfigRefused(t *testing.T) {
	_, err := natsrelay.Handler(natsrelay.Config{})
	require.ErrorIs(t, err, natsrelay.ErrConfig)
	_, err = natsrelay.Handler(natsrelay.Config{JetStream: struct{ jetstream.JetStream }{}})
	require.ErrorIs(t, err, natsrelay.ErrConfig)

	// A connection that buffers publishes while reconnecting could store a
	// batch out of order: refused, unless publishes are sequential.
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second))
	if err != nil {
		relaytest.Unreachable(t, "NATS", "SEQBOX_NATS_URL", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix("x", false)})
	require.ErrorIs(t, err, natsrelay.ErrConfig)
	require.ErrorContains(t, err, "ReconnectBufSize(-1)")
	_, err = natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix("x", false), Sequential: true})
	require.NoError(t, err)
}

// TestContextHeaders: headers from the handler's context (the relay's
// consumer span, with seqboxotel) replace the message's own of that name.
func TestContextHeaders(t *testing.T) {
	ctx, js, db, name := setup(t)
	stream := createStream(ctx, t, js, name)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix(name, false),
		ContextHeaders: func(context.Context, string) map[string]string { return map[string]string{"traceparent": "00-relay"} }})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 1, h).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 3)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	msgs := stored(ctx, t, stream)
	require.Len(t, msgs, 3)
	for _, m := range msgs {
		require.Equal(t, "00-relay", m.Header.Get("traceparent"))
		require.Equal(t, string(m.Data), m.Header.Get("n"))
	}
}

// TestRelayBrokerDown: NATS goes away mid-stream (every connection cut,
// new ones refused): partitions retry with backoff, skip nothing, and the
// client reconnects once it is back; the stream ends holding every message
// once, in order per partition.
func TestRelayBrokerDown(t *testing.T) {
	ctx, js, db, name := setup(t)
	stream := createStream(ctx, t, js, name)
	proxy := relaytest.NewProxy(t, strings.TrimPrefix(natsURL(), "nats://"))
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	defer nc.Close()
	viaProxy, err := jetstream.New(nc)
	require.NoError(t, err)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: viaProxy, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
	require.NoError(t, err)
	ids := relaytest.BrokerDown(ctx, t, db, h, proxy, 300)
	checkStream(t, stored(ctx, t, stream), ids, name)
}
