package rabbitmqrelay_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// sbinEnv names the directory of RabbitMQ's own scripts (rabbitmq-server,
// rabbitmqctl) for the cluster test: not /usr/sbin's wrappers, which run
// the machine's node as user rabbitmq with its settings.
const sbinEnv = "SEQBOX_RABBITMQ_SBIN"

// missing reports something the cluster test needs and cannot have: under
// CI=true the test fails, otherwise it is skipped loudly.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING THE RABBITMQ CLUSTER TEST: %s ***\n\n", msg)
	t.Skip(msg)
}

// rabbitCluster is a private cluster of RabbitMQ nodes on this machine,
// each with its own node name, AMQP and distribution ports, and data and
// log directories, sharing an Erlang cookie in a HOME of their own; the
// machine's node (and its settings) is never touched. Only epmd is
// shared, as every Erlang node on a machine shares it.
type rabbitCluster struct {
	sbin  string
	home  string // HOME of the nodes and of rabbitmqctl: the cookie
	envf  string // an empty rabbitmq-env.conf, read instead of the machine's
	nodes []*rabbitNode
}

type rabbitNode struct {
	name   string // sbq<run>-<i>@localhost
	url    string // AMQP, as guest
	dir    string
	cmd    *exec.Cmd // its own process group: rabbitmq-server, erl
	exited chan struct{}
}

// startRabbitCluster starts n nodes at once and waits until they are
// one cluster: node 1 boots alone, the others find it through classic
// peer discovery (RabbitMQ's own cluster formation, configured with node 1
// as the seed) and join it as they boot, which takes one boot's time where
// rabbitmqctl join_cluster takes a boot, a stop_app and a start_app. The
// nodes are SIGKILLed and their files removed when the test ends.
func startRabbitCluster(ctx context.Context, t *testing.T, n int) *rabbitCluster {
	sbin := os.Getenv(sbinEnv)
	if sbin == "" {
		sbin = "/usr/lib/rabbitmq/bin"
	}
	for _, tool := range []string{"rabbitmq-server", "rabbitmqctl"} {
		if _, err := exec.LookPath(filepath.Join(sbin, tool)); err != nil {
			missing(t, fmt.Sprintf("RabbitMQ's %s is not in %s (%v); install rabbitmq-server or set %s", tool, sbin, err, sbinEnv))
		}
	}
	dir := t.TempDir()
	c := &rabbitCluster{sbin: sbin, home: filepath.Join(dir, "home"), envf: filepath.Join(dir, "rabbitmq-env.conf")}
	require.NoError(t, os.Mkdir(c.home, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(c.home, ".erlang.cookie"), fmt.Appendf(nil, "SEQBOX%016X", rand.Uint64()), 0o400))
	require.NoError(t, os.WriteFile(c.envf, nil, 0o600))
	plugins := filepath.Join(dir, "enabled_plugins")
	require.NoError(t, os.WriteFile(plugins, []byte("[].\n"), 0o600)) // no management or other listeners
	ports := relaytest.FreePorts(t, 2*n)
	run := fmt.Sprintf("sbq%06x", rand.IntN(1<<24)) // concurrent runs register distinct names with epmd
	for i := range n {
		c.nodes = append(c.nodes, &rabbitNode{name: fmt.Sprintf("%s-%d@localhost", run, i+1),
			url: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", ports[2*i]), dir: filepath.Join(dir, strconv.Itoa(i+1)), exited: make(chan struct{})})
	}
	began := time.Now()
	for i, nd := range c.nodes {
		conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\n", ports[2*i])
		if i > 0 {
			conf += "cluster_formation.peer_discovery_backend = classic_config\n" +
				"cluster_formation.classic_config.nodes.1 = " + c.nodes[0].name + "\n" +
				// Wait for node 1 as long as the test would (its boot
				// under load), not 10 × 500 ms, after which a node would
				// boot on its own.
				"cluster_formation.discovery_retry_limit = 1200\n" +
				"cluster_formation.discovery_retry_interval = 100\n"
		}
		require.NoError(t, os.MkdirAll(filepath.Join(nd.dir, "log"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(nd.dir, "rabbitmq.conf"), []byte(conf), 0o600))
		out, err := os.Create(filepath.Join(nd.dir, "console.log"))
		require.NoError(t, err)
		nd.cmd = exec.Command(filepath.Join(sbin, "rabbitmq-server"))
		nd.cmd.Dir = nd.dir
		nd.cmd.Stdout, nd.cmd.Stderr = out, out
		nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		nd.cmd.Env = append(c.env(),
			"RABBITMQ_NODENAME="+nd.name,
			"RABBITMQ_DIST_PORT="+strconv.Itoa(ports[2*i+1]),
			"RABBITMQ_CONFIG_FILE="+filepath.Join(nd.dir, "rabbitmq.conf"),
			"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(nd.dir, "advanced.config"), // absent: not /etc's
			"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
			"RABBITMQ_MNESIA_BASE="+filepath.Join(nd.dir, "mnesia"),
			"RABBITMQ_LOG_BASE="+filepath.Join(nd.dir, "log"),
			"RABBITMQ_PID_FILE="+filepath.Join(nd.dir, "pid"),
			"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
			"ERL_CRASH_DUMP="+filepath.Join(nd.dir, "erl_crash.dump"),
		)
		err = nd.cmd.Start()
		_ = out.Close()
		require.NoError(t, err, "starting node %s", nd.name)
		go func() { _ = nd.cmd.Wait(); close(nd.exited) }()
		t.Cleanup(func() {
			nd.kill(t)
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(nd.dir, "log", nd.name+".log"))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("end of node %s's log:\n%s", nd.name, b)
			}
		})
		if i == 0 && n > 1 {
			// The others join a node 1 that has finished booting. Booted
			// together, a joining node could still hold the feature flags
			// of a new node (user_limits, virtual_host_metadata off) when it
			// read node 1's tables, shaped by those flags, and refuse to
			// boot: schema_integrity_check_failed (RabbitMQ 3.10).
			if err := nd.awaitAMQP(ctx); err != nil {
				t.Fatalf("the first node did not start: %v", err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, nd := range c.nodes {
		wg.Go(func() { errs[i] = nd.awaitAMQP(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the nodes did not start: %v", err)
	}
	// Each node opened its AMQP listener once it had joined node 1: the
	// members of a quorum queue show that they are one cluster.
	// Nodes that boot together can leave a feature flag disabled (in
	// RabbitMQ 3.10, quorum_queue, whose queues are then refused): enable
	// every flag the nodes support, across the cluster, before use.
	c.ctl(ctx, t, 0, "enable_feature_flag", "all")
	t.Logf("%d RabbitMQ nodes up in %s (2 shared cores: noisy)", n, time.Since(began).Round(100*time.Millisecond))
	return c
}

// env is the environment of the nodes and of rabbitmqctl: this process's
// without its RabbitMQ and Erlang settings, with the cluster's HOME and an
// empty rabbitmq-env.conf.
func (c *rabbitCluster) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "RABBITMQ_") || strings.HasPrefix(kv, "ERL_") || strings.HasPrefix(kv, "HOME=")
	})
	return append(env, "HOME="+c.home, "RABBITMQ_CONF_ENV_FILE="+c.envf)
}

// ctl runs rabbitmqctl against node i and returns its output.
func (c *rabbitCluster) ctl(ctx context.Context, t *testing.T, i int, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(c.sbin, "rabbitmqctl"), append([]string{"-n", c.nodes[i].name, "-q"}, args...)...)
	cmd.Env = c.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rabbitmqctl -n %s %s: %v\n%s%s", c.nodes[i].name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// quorumQueue is what rabbitmqctl list_queues tells of a quorum queue.
type quorumQueue struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
}

// queue asks node i about the broker queue name.
func (c *rabbitCluster) queue(ctx context.Context, t *testing.T, i int, name string) quorumQueue {
	t.Helper()
	var qs []quorumQueue
	require.NoError(t, json.Unmarshal(c.ctl(ctx, t, i, "list_queues", "--formatter", "json", "name", "type", "leader", "members"), &qs))
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("node %s does not list queue %s: %+v", c.nodes[i].name, name, qs)
	return quorumQueue{}
}

// index is the position of the node named name.
func (c *rabbitCluster) index(t *testing.T, name string) int {
	t.Helper()
	i := slices.IndexFunc(c.nodes, func(nd *rabbitNode) bool { return nd.name == name })
	require.GreaterOrEqual(t, i, 0, "no node %s", name)
	return i
}

// awaitAMQP returns once the node accepts an AMQP connection (it opens its
// listener last, when it has booted and joined), or with the reason it
// will not: it exited, or ctx ended.
func (nd *rabbitNode) awaitAMQP(ctx context.Context) error {
	for {
		conn, err := amqp.DialConfig(nd.url, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			return conn.Close()
		}
		select {
		case <-nd.exited:
			return fmt.Errorf("node %s exited while booting: %s", nd.name, nd.tail())
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w (last dial: %v): %s", nd.name, ctx.Err(), err, nd.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail is the end of the node's console output, for a failure.
func (nd *rabbitNode) tail() string {
	b, _ := os.ReadFile(filepath.Join(nd.dir, "console.log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// kill SIGKILLs the node's process group (the rabbitmq-server script and
// the Erlang VM; the VM's helper processes exit with it) and waits for it.
func (nd *rabbitNode) kill(t testing.TB) {
	if err := syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("killing node %s: %v", nd.name, err)
	}
	select {
	case <-nd.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("node %s did not exit after SIGKILL", nd.name)
	}
}

// consumeAll reads every message of the broker queue name, which no one
// publishes to any more: a consumer (quicker than drain's one get per
// message) until as many came as the queue held, then drain for any the
// consumer was not handed before it was cancelled.
func consumeAll(ctx context.Context, t *testing.T, conn *amqp.Connection, name string) []amqp.Delivery {
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	require.NoError(t, err)
	deliveries, err := ch.Consume(name, "all", true, false, false, false, nil)
	require.NoError(t, err)
	var got []amqp.Delivery
	for len(got) < q.Messages {
		select {
		case d, ok := <-deliveries:
			require.True(t, ok, "the consumer was closed")
			got = append(got, d)
		case <-ctx.Done():
			t.Fatalf("%d of the %d messages came: %v", len(got), q.Messages, ctx.Err())
		}
	}
	require.NoError(t, ch.Cancel("all", false))
	for d := range deliveries { // what came before the cancel's confirmation
		got = append(got, d)
	}
	return append(got, drain(t, conn, name)...)
}

// confirmHold loses the publisher confirms of the relay's connection to
// the leader: once armed, it hands the relay every frame from the broker
// but the basic.acks, and keeps the message-id of every message an ack it
// swallowed confirms. The broker has stored those messages (a quorum
// queue confirms what a majority of its members has); the relay has not
// seen them confirmed, and publishes them again after the kill, when the
// connection fails. It reads AMQP 0-9-1 frames both ways: the relay's
// publishes (delivery tag → message-id, per channel) and the broker's
// acks.
type confirmHold struct {
	mu       sync.Mutex
	armed    bool
	held     []string            // message-ids whose confirm the relay never got
	ids      map[uint16][]string // per channel, the message-id of delivery tag i+1
	acked    map[uint16]uint64   // per channel, the highest tag acked
	in, out  []byte              // partial frames from the broker, to it
	pending  []byte              // whole frames for the relay to read
	preamble int                 // protocol header bytes still to skip in out
	first    chan struct{}       // closed at the first confirm held
	once     sync.Once
}

func newConfirmHold() *confirmHold {
	return &confirmHold{ids: map[uint16][]string{}, acked: map[uint16]uint64{}, preamble: 8, first: make(chan struct{})}
}

func (h *confirmHold) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

// heldIDs are the message-ids whose confirms were held.
func (h *confirmHold) heldIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.held)
}

// frames cuts the whole frames off buf: type, channel, payload.
func frames(buf *[]byte, each func(typ byte, ch uint16, payload []byte, frame []byte)) {
	for len(*buf) >= 7 {
		size := int(binary.BigEndian.Uint32((*buf)[3:7]))
		if len(*buf) < 7+size+1 {
			return
		}
		frame := (*buf)[:7+size+1]
		each(frame[0], binary.BigEndian.Uint16(frame[1:3]), frame[7:7+size], frame)
		*buf = (*buf)[len(frame):]
	}
}

// method is a method frame's class and method ids.
func method(payload []byte) (class, id uint16) {
	if len(payload) < 4 {
		return 0, 0
	}
	return binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:])
}

// messageID reads the message-id property of a content header frame.
func messageID(payload []byte) string {
	if len(payload) < 14 {
		return ""
	}
	flags, p := binary.BigEndian.Uint16(payload[12:]), payload[14:]
	skip := func(n int) bool {
		if n > len(p) {
			return false
		}
		p = p[n:]
		return true
	}
	shortstr := func() bool { return len(p) > 0 && skip(1+int(p[0])) }
	ok := true
	if flags&(1<<15) != 0 { // content-type
		ok = ok && shortstr()
	}
	if flags&(1<<14) != 0 { // content-encoding
		ok = ok && shortstr()
	}
	if flags&(1<<13) != 0 { // headers, a table with its length first
		ok = ok && len(p) >= 4 && skip(4+int(binary.BigEndian.Uint32(p)))
	}
	if flags&(1<<12) != 0 { // delivery-mode
		ok = ok && skip(1)
	}
	if flags&(1<<11) != 0 { // priority
		ok = ok && skip(1)
	}
	for bit := 10; bit >= 8; bit-- { // correlation-id, reply-to, expiration
		if flags&(1<<bit) != 0 {
			ok = ok && shortstr()
		}
	}
	if !ok || flags&(1<<7) == 0 || len(p) == 0 || 1+int(p[0]) > len(p) {
		return ""
	}
	return string(p[1 : 1+int(p[0])])
}

// sent notes the relay's channel openings and publishes, before they go.
func (h *confirmHold) sent(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.preamble > 0 {
		n := min(h.preamble, len(b))
		h.preamble -= n
		b = b[n:]
	}
	h.out = append(h.out, b...)
	frames(&h.out, func(typ byte, ch uint16, payload, _ []byte) {
		switch class, id := method(payload); {
		case typ == 1 && class == 20 && id == 10: // channel.open: tags start again
			h.ids[ch], h.acked[ch] = nil, 0
		case typ == 1 && class == 60 && id == 40: // basic.publish
			h.ids[ch] = append(h.ids[ch], "")
		case typ == 2 && len(h.ids[ch]) > 0: // its content header
			h.ids[ch][len(h.ids[ch])-1] = messageID(payload)
		}
	})
}

// received takes bytes from the broker: whole frames go to pending, for
// the relay, but for the basic.acks once the hold is armed: the messages
// those confirm are held.
func (h *confirmHold) received(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.in = append(h.in, b...)
	frames(&h.in, func(typ byte, ch uint16, payload, frame []byte) {
		var confirmed []string
		if class, id := method(payload); typ == 1 && class == 60 && id == 80 && len(payload) >= 13 { // basic.ack
			tag, multiple := binary.BigEndian.Uint64(payload[4:]), payload[12]&1 != 0
			from := tag
			if multiple {
				from = h.acked[ch] + 1
			}
			for t := from; t <= tag && t <= uint64(len(h.ids[ch])); t++ {
				confirmed = append(confirmed, h.ids[ch][t-1])
			}
			h.acked[ch] = max(h.acked[ch], tag)
		}
		if !h.armed || confirmed == nil {
			h.pending = append(h.pending, frame...)
			return
		}
		h.held = append(h.held, confirmed...)
		h.once.Do(func() { close(h.first) })
	})
}

// holdConn is the relay's connection to the leader, through a hold.
type holdConn struct {
	net.Conn
	h *confirmHold
}

func (c *holdConn) Write(b []byte) (int, error) {
	c.h.sent(b)
	return c.Conn.Write(b)
}

func (c *holdConn) Read(b []byte) (int, error) {
	buf := make([]byte, 32<<10)
	for {
		c.h.mu.Lock()
		n := copy(b, c.h.pending)
		c.h.pending = c.h.pending[n:]
		c.h.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		m, err := c.Conn.Read(buf)
		c.h.received(buf[:m])
		if err != nil {
			c.h.mu.Lock()
			n := copy(b, c.h.pending)
			c.h.pending = c.h.pending[n:]
			c.h.mu.Unlock()
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
	}
}

// ackTracker is a middleware that keeps the ids the relay acked until the
// kill, and those handed to it after, and arms the hold once after have
// been acked.
type ackTracker struct {
	after  int
	hold   *confirmHold
	mu     sync.Mutex
	acked  []outbox.MessageID
	killed bool
	again  map[outbox.MessageID]bool
}

func (k *ackTracker) middleware(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
	k.mu.Lock()
	if k.killed {
		for _, d := range c.Batch.Messages {
			k.again[d.ID] = true
		}
	}
	k.mu.Unlock()
	err := next(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.killed {
		for _, d := range c.Batch.Messages[:c.Batch.Acked()] {
			k.acked = append(k.acked, d.ID)
		}
		if len(k.acked) >= k.after {
			k.hold.arm()
		}
	}
	return err
}

func (k *ackTracker) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	k.again = map[outbox.MessageID]bool{}
}

// TestRelayQuorumQueueLeaderKilled: the relay publishes into an exchange
// bound to a quorum queue replicated on a 3-node cluster; the queue's
// leader, the node the relay is connected to, is SIGKILLed mid-stream: as
// soon as it has sent a publisher confirm that the relay never gets
// (confirmHold). The relay goes on through another node (DialCluster)
// without a restart, and the surviving nodes hold every message: at least
// once, repeats with the same message-id and content, and per partition
// the first arrivals in seq order with none skipped (checkQueue). Each
// message whose confirm the leader sent before it died is there twice:
// the copy it confirmed, which the survivors had (a quorum queue confirms
// what a majority of its members has), and the relay's publish again.
// Every message the relay saw confirmed before the kill, and seqbox never
// published again, is there too.
func TestRelayQuorumQueueLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c := startRabbitCluster(ctx, t, 3)
	clustered := time.Since(began)

	// Declared through node 1, the queue's leader is node 1 (RabbitMQ's
	// default client-local leader locator); the test reads it anyway.
	conn, err := amqp.Dial(c.nodes[0].url)
	require.NoError(t, err)
	defer conn.Close()
	name := fmt.Sprintf("sbt%d", rand.Uint64()%1e12)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil))
	_, err = ch.QueueDeclare(name, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(name, "#", name, false, nil))
	require.NoError(t, ch.Close())
	q := c.queue(ctx, t, 0, name)
	require.Equal(t, "quorum", q.Type)
	var names []string
	for _, nd := range c.nodes {
		names = append(names, nd.name)
	}
	require.ElementsMatch(t, names, q.Members, "one cluster, a queue member on every node")
	leader := c.index(t, q.Leader)

	// The leader's URL first: the relay's connection is on the node killed.
	urls := []string{c.nodes[leader].url}
	for i, nd := range c.nodes {
		if i != leader {
			urls = append(urls, nd.url)
		}
	}
	hold := newConfirmHold()
	leaderAddr := strings.TrimSuffix(strings.TrimPrefix(c.nodes[leader].url, "amqp://guest:guest@"), "/")
	wrapped := false
	dial := rabbitmqrelay.DialCluster(urls, amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		conn, err := amqp.DefaultDial(2*time.Second)(network, addr)
		if err != nil || addr != leaderAddr || wrapped {
			return conn, err
		}
		wrapped = true // the first connection to the leader (the relay dials one at a time)
		return &holdConn{Conn: conn, h: hold}, nil
	}})
	var mu sync.Mutex
	var reached []string // the URL of each connection the relay opened
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{
		Dial: func() (*amqp.Connection, error) {
			conn, err := dial()
			if err == nil {
				mu.Lock()
				reached = append(reached, "amqp://guest:guest@"+conn.RemoteAddr().String()+"/")
				mu.Unlock()
			}
			return conn, err
		},
		Exchange: name, RoutingKey: rabbitmqrelay.ByKey})
	require.NoError(t, err)
	tracker := &ackTracker{after: 150, hold: hold}
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, relaytest.RelayOptions(processor.BatchSize(50), processor.Use(tracker.middleware))...).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 600)
	select {
	case <-hold.first:
	case <-ctx.Done():
		t.Fatalf("no confirm held: %v", ctx.Err())
	}
	tracker.kill()
	c.nodes[leader].kill(t)
	require.NoError(t, ob.WaitProcessed(ctx, ids...), "the relay goes on after the kill")
	tracker.mu.Lock()
	confirmed := tracker.acked
	var kept []outbox.MessageID // confirmed before the kill and not published since
	for _, id := range confirmed {
		if !tracker.again[id] {
			kept = append(kept, id)
		}
	}
	tracker.mu.Unlock()
	require.Less(t, len(confirmed), len(ids), "work was left after the kill")

	mu.Lock()
	require.GreaterOrEqual(t, len(reached), 2, "the relay reconnected")
	require.Equal(t, c.nodes[leader].url, reached[0], "the relay was on the leader")
	require.NotEqual(t, c.nodes[leader].url, reached[len(reached)-1], "and went on through another node")
	dials := len(reached)
	mu.Unlock()

	// The survivors, a majority of the queue's members, lead it now.
	rc, err := amqp.Dial(c.nodes[(leader+1)%3].url)
	require.NoError(t, err)
	defer rc.Close()
	got := consumeAll(ctx, t, rc, name)
	repeats := checkQueue(t, got, ids)
	copies := map[string]int{}
	for _, d := range got {
		copies[d.MessageId]++
	}
	lost := hold.heldIDs()
	require.NotEmpty(t, lost)
	for _, id := range lost {
		require.GreaterOrEqual(t, copies[id], 2, "%s: confirmed by the leader before it died, then published again", id)
	}
	// What seqbox did not publish again after the kill is on the survivors
	// because they had it when the leader died.
	require.NotEmpty(t, kept, "messages confirmed before the kill and not published again")
	for _, id := range kept {
		require.Positive(t, copies[id.String()], "%s was confirmed before the leader died, and lost", id)
	}
	t.Logf("cluster up in %s; %d messages, %d confirmed before the kill (%d not published again), %d confirms lost with the leader, %d repeats, %d retried calls, %d relay connections; test %s",
		clustered.Round(100*time.Millisecond), len(ids), len(confirmed), len(kept), len(lost), repeats, ob.Counters().Retried, dials, time.Since(began).Round(100*time.Millisecond))
}
