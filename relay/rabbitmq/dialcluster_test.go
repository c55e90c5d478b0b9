package rabbitmqrelay_test

import (
	"crypto/tls"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// nodes stands n proxies to the test broker in for the nodes of a
// cluster: their URLs (with the broker's credentials) and the proxies.
func nodes(t *testing.T, n int) ([]string, []*relaytest.Proxy) {
	uri, err := amqp.ParseURI(amqpURL())
	require.NoError(t, err)
	target := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	urls, proxies := make([]string, n), make([]*relaytest.Proxy, n)
	for i := range n {
		proxies[i] = relaytest.NewProxy(t, target)
		host, port, err := net.SplitHostPort(proxies[i].Addr())
		require.NoError(t, err)
		u := uri
		u.Host = host
		u.Port, err = strconv.Atoi(port)
		require.NoError(t, err)
		urls[i] = u.String()
	}
	return urls, proxies
}

// TestDialClusterTriesNodesInTurn: each dial begins with the node after
// the one the last dial reached, passes the nodes that refuse, and fails
// only when every node does, naming each without its password.
func TestDialClusterTriesNodesInTurn(t *testing.T) {
	setup(t) // skips, or fails under CI=true, without a broker
	urls, proxies := nodes(t, 3)
	dial := rabbitmqrelay.DialCluster(urls, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	on := func() string {
		t.Helper()
		conn, err := dial()
		require.NoError(t, err)
		defer conn.Close()
		for i, p := range proxies {
			if conn.RemoteAddr().String() == p.Addr() {
				return strconv.Itoa(i)
			}
		}
		t.Fatalf("connected to %s, none of the nodes", conn.RemoteAddr())
		return ""
	}
	require.Equal(t, "0", on())
	require.Equal(t, "1", on())
	require.Equal(t, "2", on())
	require.Equal(t, "0", on(), "round the nodes again")

	proxies[1].Down() // the next node in turn is gone
	require.Equal(t, "2", on())
	require.Positive(t, proxies[1].Refused(), "node 1 was tried first")
	require.Equal(t, "0", on())

	for _, p := range proxies {
		p.Down()
	}
	_, err := dial()
	require.Error(t, err)
	uri, err2 := amqp.ParseURI(urls[0])
	require.NoError(t, err2)
	for _, u := range urls {
		parsed, err2 := url.Parse(u)
		require.NoError(t, err2)
		require.Contains(t, err.Error(), "node "+parsed.Redacted()+":", "every node's error")
	}
	require.NotContains(t, err.Error(), ":"+uri.Password+"@", "passwords are redacted")
}

// TestDialClusterConfig: no URL, or amqp091's own recovery, is a config
// error; the Properties and TLS config given are not written into.
func TestDialClusterConfig(t *testing.T) {
	_, err := rabbitmqrelay.DialCluster(nil, amqp.Config{})()
	require.ErrorIs(t, err, rabbitmqrelay.ErrConfig)
	_, err = rabbitmqrelay.DialCluster([]string{amqpURL()}, amqp.Config{Recovery: &amqp.Recovery{}})()
	require.ErrorIs(t, err, rabbitmqrelay.ErrConfig)

	setup(t)
	urls, _ := nodes(t, 2)
	props := amqp.Table{"connection_name": "relay"}
	dial := rabbitmqrelay.DialCluster(urls, amqp.Config{Properties: props})
	var wg sync.WaitGroup
	for range 4 { // concurrent dials share the config (go test -race)
		wg.Go(func() {
			conn, err := dial()
			if err == nil {
				_ = conn.Close()
			}
		})
	}
	wg.Wait()
	require.Equal(t, amqp.Table{"connection_name": "relay"}, props)

	// amqps to a plain AMQP port fails its handshake, after amqp091 has
	// set the TLS ServerName of the config it was given.
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	_, err = rabbitmqrelay.DialCluster([]string{strings.Replace(urls[0], "amqp://", "amqps://", 1)},
		amqp.Config{TLSClientConfig: tlsConfig, Dial: amqp.DefaultDial(2 * time.Second)})()
	require.Error(t, err)
	require.Empty(t, tlsConfig.ServerName)
}

// TestRelayDialClusterFailsOver: the node the relay is connected to goes
// away for good (every connection cut, new ones refused) mid-stream; the
// relay's next dial reaches another node and everything arrives, each
// partition's first arrivals in order, without restarting anything.
func TestRelayDialClusterFailsOver(t *testing.T) {
	ctx, conn, db, name := setup(t)
	declare(t, conn, name)
	urls, proxies := nodes(t, 2)
	dial := rabbitmqrelay.DialCluster(urls, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	var mu sync.Mutex
	var reached []string // the node of each connection the relay opened
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{
		Dial: func() (*amqp.Connection, error) {
			conn, err := dial()
			if err == nil {
				mu.Lock()
				reached = append(reached, conn.RemoteAddr().String())
				mu.Unlock()
			}
			return conn, err
		},
		RoutingKey: func(processor.Delivery) string { return name }})
	require.NoError(t, err)
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).Queue("orders", 2, h, relaytest.RelayOptions()...).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 300)
	require.Eventually(t, func() bool { return ob.Counters().Delivered > 0 }, time.Minute, 5*time.Millisecond)
	proxies[0].Down()
	if d := ob.Counters().Delivered; d >= int64(len(ids)) {
		t.Fatalf("all %d delivered before the node went away: nothing tested", d)
	}
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	checkQueue(t, drain(t, conn, name), ids)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{proxies[0].Addr(), proxies[1].Addr()}, reached, "one connection to each node")
}
