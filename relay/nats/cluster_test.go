package natsrelay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	natsrelay "github.com/seqbox/seqbox/relay/nats"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// natsCluster is a private 3-node JetStream cluster (docs/CLUSTERS.md):
// nats-server processes on ports and store directories of their own.
type natsCluster struct {
	servers []*relaytest.Server
	urls    []string // servers[i]'s client URL
}

func startNATSCluster(t *testing.T) *natsCluster {
	bin := relaytest.Binary(t, "nats-server")
	ports := relaytest.FreePorts(t, 6) // 3 client ports, 3 route ports
	c := &natsCluster{}
	var routes []string
	for i := range 3 {
		c.urls = append(c.urls, "nats://127.0.0.1:"+strconv.Itoa(ports[i]))
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3+i]))
	}
	for i := range 3 {
		others := append(append([]string{}, routes[:i]...), routes[i+1:]...)
		name := "n" + strconv.Itoa(i+1)
		c.servers = append(c.servers, relaytest.StartServer(t, name, bin,
			"-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "--server_name", name,
			"-js", "-sd", filepath.Join(t.TempDir(), name),
			"--cluster_name", "seqbox-test", "--cluster", routes[i], "--routes", strings.Join(others, ",")))
	}
	return c
}

// server is the member named name.
func (c *natsCluster) server(t *testing.T, name string) (*relaytest.Server, string) {
	for i, s := range c.servers {
		if s.Name == name {
			return s, c.urls[i]
		}
	}
	t.Fatalf("no member %q", name)
	return nil, ""
}

// connect connects to the cluster, to first before the others when set: a
// relay's connection, given every member and reconnecting for ever, with
// no reconnect buffer (see natsrelay's package doc).
func (c *natsCluster) connect(t *testing.T, first string) *nats.Conn {
	urls := []string{}
	if first != "" {
		urls = append(urls, first)
	}
	for _, u := range c.urls {
		if u != first {
			urls = append(urls, u)
		}
	}
	var nc *nats.Conn
	var err error
	waitFor(t, "a connection to the cluster", func() bool {
		nc, err = nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.Timeout(time.Second),
			nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
		return err == nil
	})
	t.Cleanup(nc.Close)
	return nc
}

// waitFor polls cond (every 20 ms, for at most a minute) until it holds;
// lastErr, when given, is the error cond last saw, for the failure.
func waitFor(t *testing.T, what string, cond func() bool, lastErr ...*error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			if len(lastErr) > 0 && *lastErr[0] != nil {
				t.Fatalf("waiting for %s: not after a minute (last error: %v)", what, *lastErr[0])
			}
			t.Fatalf("waiting for %s: not after a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createR3Stream creates a stream replicated on the 3 members, once the
// cluster can place it, and waits until it has a leader and both
// followers are current.
func createR3Stream(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) (jetstream.Stream, *jetstream.StreamInfo) {
	var s jetstream.Stream
	var err error
	waitFor(t, "the cluster to place an R3 stream", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second) // a request sent before the cluster is up gets no answer
		defer cancel()
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
			Replicas: 3, Storage: jetstream.FileStorage, Duplicates: time.Minute})
		return err == nil
	}, &err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return s, waitStreamHealthy(ctx, t, s)
}

// waitStreamHealthy waits until s has a leader and two current followers.
func waitStreamHealthy(ctx context.Context, t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	var info *jetstream.StreamInfo
	waitFor(t, "the stream's leader and current followers", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var err error
		info, err = s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	})
	return info
}

// TestClusterMemberKilled: a relay publishes to an R3 stream of a 3-node
// JetStream cluster, connected to one member and given the others, and
// that member is SIGKILLed mid-stream; first when it leads the stream (a
// leader election in the middle of pipelined publishes), then when it is a
// follower. A batch the killed member had confirmed is published again
// (its ack lost), so Nats-Msg-Id must drop it across the leader change.
// The relay, never restarted, reconnects to another member on the same
// nats.Conn and goes on while the member is down; the member comes back
// and catches up. The stream ends holding every message once, per
// partition in seq order.
func TestClusterMemberKilled(t *testing.T) {
	c := startNATSCluster(t)
	admin := c.connect(t, "")
	adminJS, err := jetstream.New(admin)
	require.NoError(t, err)
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			name := fmt.Sprintf("sbc%d", rand.Uint64()%1e12)
			stream, info := createR3Stream(ctx, t, adminJS, name)
			victimName := info.Cluster.Leader
			if role == "follower" {
				victimName = info.Cluster.Replicas[0].Name
			}
			victim, victimURL := c.server(t, victimName)
			nc := c.connect(t, victimURL)
			require.Equal(t, victimName, nc.ConnectedServerName(), "the relay starts on the member to be killed")
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			hold := relaytest.NewHold(func(int) bool { return true })
			h, err := natsrelay.Handler(natsrelay.Config{JetStream: lossyJS{js, hold}, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
			require.NoError(t, err)
			db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))

			ids := relaytest.MemberKilled(ctx, t, db, h, 400, hold, victim.Kill,
				func(ob *seqbox.Outbox, lost outbox.MessageID) {
					// Published again and confirmed while the member is down.
					require.NoError(t, ob.WaitProcessed(ctx, lost))
					var now *jetstream.StreamInfo
					waitFor(t, "the stream's leader", func() bool {
						ctx, cancel := context.WithTimeout(ctx, time.Second)
						defer cancel()
						now, err = stream.Info(ctx)
						return err == nil && now.Cluster != nil && now.Cluster.Leader != ""
					})
					require.NotEqual(t, victimName, now.Cluster.Leader)
					if role == "leader" {
						t.Logf("leader %s killed, %s elected", victimName, now.Cluster.Leader)
					}
					victim.Start()
					waitStreamHealthy(ctx, t, stream) // the member is back and current
				})

			checkStream(t, stored(ctx, t, stream), ids, name)
			require.Positive(t, nc.Stats().Reconnects, "the relay's connection moved to another member")
			require.NotEqual(t, victimName, nc.ConnectedServerName())
		})
	}
}

// lossyJS is the relay's JetStream with a relaytest.Hold: the confirm the
// hold takes reaches the relay as relaytest.ErrConfirmLost, as when the
// member that sent it dies before it arrives.
type lossyJS struct {
	jetstream.JetStream
	hold *relaytest.Hold
}

func (j lossyJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := j.JetStream.PublishMsgAsync(m, opts...)
	partition, _ := strconv.Atoi(m.Header.Get(natsrelay.HeaderPartition))
	seq, _ := strconv.ParseInt(m.Header.Get(natsrelay.HeaderSeq), 10, 64)
	if err != nil || !j.hold.Wants(partition, seq) {
		return f, err
	}
	lf := &lossyFuture{PubAckFuture: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	go func() {
		select {
		case ack := <-f.Ok():
			if j.hold.Take(partition, seq, m.Header.Get(natsrelay.HeaderMsgID)) {
				lf.err <- relaytest.ErrConfirmLost
			} else {
				lf.ok <- ack
			}
		case err := <-f.Err():
			lf.err <- err
		}
	}()
	return lf, nil
}

type lossyFuture struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *lossyFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *lossyFuture) Err() <-chan error            { return f.err }
