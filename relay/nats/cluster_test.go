package natsrelay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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
	relaytest.WaitUntil(t, "a connection to the cluster", func() (err error) {
		nc, err = nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.Timeout(time.Second),
			nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
		return err
	})
	t.Cleanup(nc.Close)
	return nc
}

// createR3Stream creates a stream replicated on the 3 members, once the
// cluster can place it, and waits until it has a leader and both
// followers are current.
func createR3Stream(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) (jetstream.Stream, *jetstream.StreamInfo) {
	var s jetstream.Stream
	relaytest.WaitUntil(t, "the cluster to place an R3 stream", func() (err error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second) // a request sent before the cluster is up gets no answer
		defer cancel()
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
			Replicas: 3, Storage: jetstream.FileStorage, Duplicates: time.Minute})
		return err
	})
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return s, waitStreamHealthy(ctx, t, s)
}

// waitStreamHealthy waits until s has a leader and two current followers.
func waitStreamHealthy(ctx context.Context, t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	var info *jetstream.StreamInfo
	relaytest.WaitUntil(t, "the stream's leader and current followers", func() (err error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if info, err = s.Info(ctx); err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("follower %+v", *r)
			}
		}
		return nil
	})
	return info
}

// TestClusterMemberKilled: a relay publishes to an R3 stream of a 3-node
// JetStream cluster, connected to one member and given the others, and
// that member is SIGKILLed mid-stream: first when it leads the stream (a
// leader election in the middle of pipelined publishes), then when it is a
// follower. The confirm of a message the cluster had stored just before
// the kill is kept from the relay, which publishes the message again: the
// stream, under a new leader in the first case, must know it by its
// Nats-Msg-Id and drop it. The relay, never restarted, reconnects to
// another member on the same nats.Conn and goes on while the member is
// down; the member comes back and catches up. The stream ends holding
// every message once, per partition in seq order.
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
			lossy := &lossyJS{JetStream: js, hold: relaytest.NewHold(func(int) bool { return true })}
			h, err := natsrelay.Handler(natsrelay.Config{JetStream: lossy, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
			require.NoError(t, err)
			db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))

			ids := relaytest.MemberKilled(ctx, t, db, h, 400, lossy.hold, victim.Kill,
				func(ob *seqbox.Outbox, lost outbox.MessageID) {
					// Published again and confirmed while the member is down.
					require.NoError(t, ob.WaitProcessed(ctx, lost))
					var now *jetstream.StreamInfo
					relaytest.WaitUntil(t, "the stream's leader", func() (err error) {
						ctx, cancel := context.WithTimeout(ctx, time.Second)
						defer cancel()
						if now, err = stream.Info(ctx); err == nil && (now.Cluster == nil || now.Cluster.Leader == "") {
							err = fmt.Errorf("no leader: %+v", now.Cluster)
						}
						return err
					})
					require.NotEqual(t, victimName, now.Cluster.Leader)
					if role == "leader" {
						t.Logf("leader %s killed, %s elected", victimName, now.Cluster.Leader)
					}
					victim.Start()
					waitStreamHealthy(ctx, t, stream) // the member is back and current
				})

			require.Equal(t, int32(againDuplicate), lossy.again.Load(),
				"published again, the held message was a duplicate: the cluster had kept it through the kill")
			checkStream(t, stored(ctx, t, stream), ids, name)
			require.Positive(t, nc.Stats().Reconnects, "the relay's connection moved to another member")
			require.NotEqual(t, victimName, nc.ConnectedServerName())
		})
	}
}

// lossyJS is the relay's JetStream with a relaytest.Hold: the confirm the
// hold takes reaches the relay as relaytest.ErrConfirmLost, as when the
// member that sent it dies before it arrives. It records what the stream
// says when that message is published again: a duplicate (it kept the
// message through the kill) or a new message.
type lossyJS struct {
	jetstream.JetStream
	hold   *relaytest.Hold
	heldID atomic.Pointer[string]
	again  atomic.Int32 // againDuplicate, againStored, or 0 before the first confirm
}

const (
	againDuplicate = 1 + iota
	againStored
)

func (j *lossyJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := j.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return f, err
	}
	id := m.Header.Get(natsrelay.HeaderMsgID) // set by the publish
	partition, _ := strconv.Atoi(m.Header.Get(natsrelay.HeaderPartition))
	seq, _ := strconv.ParseInt(m.Header.Get(natsrelay.HeaderSeq), 10, 64)
	if held := j.heldID.Load(); held != nil && *held == id {
		return forward(f, func(ack *jetstream.PubAck) error {
			again := int32(againStored)
			if ack.Duplicate {
				again = againDuplicate
			}
			j.again.CompareAndSwap(0, again)
			return nil
		}), nil
	}
	if j.hold.Wants(partition, seq) {
		return forward(f, func(*jetstream.PubAck) error {
			if !j.hold.Take(partition, seq, id) {
				return nil
			}
			j.heldID.Store(&id)
			return relaytest.ErrConfirmLost
		}), nil
	}
	return f, nil
}

// forward is f, with onAck between its confirm and the relay: an error
// from onAck reaches the relay instead of the confirm.
func forward(f jetstream.PubAckFuture, onAck func(*jetstream.PubAck) error) jetstream.PubAckFuture {
	lf := &lossyFuture{PubAckFuture: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	go func() {
		select {
		case ack := <-f.Ok():
			if err := onAck(ack); err != nil {
				lf.err <- err
			} else {
				lf.ok <- ack
			}
		case err := <-f.Err():
			lf.err <- err
		}
	}()
	return lf
}

type lossyFuture struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *lossyFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *lossyFuture) Err() <-chan error            { return f.err }
