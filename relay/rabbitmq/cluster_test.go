package rabbitmqrelay_test

import (
	"bytes"
	"context"
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
	ports := freePorts(t, 2*n)
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
	Online  []string `json:"online"`
}

// queue asks node i about the broker queue name.
func (c *rabbitCluster) queue(ctx context.Context, t *testing.T, i int, name string) quorumQueue {
	t.Helper()
	var qs []quorumQueue
	require.NoError(t, json.Unmarshal(c.ctl(ctx, t, i, "list_queues", "--formatter", "json", "name", "type", "leader", "members", "online"), &qs))
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

// freePorts picks n distinct ports that are free now, below the kernel's
// range of ephemeral ports, so that no outgoing connection takes one
// before its node listens on it.
func freePorts(t *testing.T, n int) []int {
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if p, err := strconv.Atoi(f[0]); err == nil {
				hi = p
			}
		}
	}
	lo := 10000
	if hi-lo < 1000 {
		lo = 1024
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		require.Less(t, tries, 1000, "no free port in %d-%d", lo, hi)
		p := lo + rand.IntN(hi-lo)
		if slices.Contains(ports, p) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		ports = append(ports, p)
	}
	return ports
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

// leaderKiller is a middleware that SIGKILLs the quorum queue's leader
// node right after a relay call's publisher confirms (before seqbox
// commits its acks), once the calls have acked at least after messages
// and while another partition's call is in flight: the kill lands
// mid-stream, on publishes not yet confirmed. It keeps the ids confirmed
// until then, and those handed to the relay after.
type leaderKiller struct {
	after    int
	kill     func()
	mu       sync.Mutex
	inFlight int
	acked    []outbox.MessageID
	killed   bool
	again    map[outbox.MessageID]bool
}

func (k *leaderKiller) middleware(ctx context.Context, c *processor.Call, next func(context.Context) error) error {
	k.mu.Lock()
	if k.killed {
		for _, d := range c.Batch.Messages {
			k.again[d.ID] = true
		}
	}
	k.inFlight++
	k.mu.Unlock()
	err := next(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight--
	if k.killed {
		return err
	}
	for _, d := range c.Batch.Messages[:c.Batch.Acked()] {
		k.acked = append(k.acked, d.ID)
	}
	if len(k.acked) >= k.after && k.inFlight > 0 {
		k.kill()
		k.killed = true
		k.again = map[outbox.MessageID]bool{}
	}
	return err
}

// TestRelayQuorumQueueLeaderKilled: the relay publishes into an exchange
// bound to a quorum queue replicated on a 3-node cluster; the queue's
// leader, the node the relay is connected to, is SIGKILLed mid-stream
// (leaderKiller), right after a batch's publisher confirms. The relay goes on through
// another node (DialCluster) without a restart, and the surviving nodes
// hold every message: at least once, repeats with the same message-id
// and content, and per partition the first arrivals in seq order with
// none skipped (checkQueue). Every message confirmed before the kill is
// among them, though seqbox never published it again: a quorum queue
// confirms what a majority of its members has.
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
	dial := rabbitmqrelay.DialCluster(urls, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
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
	killer := &leaderKiller{after: 150, kill: func() {
		if err := syscall.Kill(-c.nodes[leader].cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Errorf("killing the leader: %v", err)
		}
	}}
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, relaytest.RelayOptions(processor.BatchSize(50), processor.Use(killer.middleware))...).Start(ctx)
	require.NoError(t, err)
	defer ob.Stop(ctx)
	ids := relaytest.Enqueue(ctx, t, ob, db, 600)
	require.NoError(t, ob.WaitProcessed(ctx, ids...), "the relay goes on after the kill")
	killer.mu.Lock()
	require.True(t, killer.killed, "the leader was killed")
	confirmed := killer.acked
	var kept []outbox.MessageID // confirmed before the kill and not published since
	for _, id := range confirmed {
		if !killer.again[id] {
			kept = append(kept, id)
		}
	}
	killer.mu.Unlock()
	select {
	case <-c.nodes[leader].exited:
	case <-ctx.Done():
		t.Fatal("the killed leader is still running")
	}
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
	present := map[string]bool{}
	for _, d := range got {
		present[d.MessageId] = true
	}
	// What seqbox did not publish again after the kill is on the survivors
	// because they had it when the leader died.
	require.NotEmpty(t, kept, "messages confirmed before the kill and not published again")
	for _, id := range kept {
		require.True(t, present[id.String()], "%s was confirmed before the leader died, and lost", id)
	}
	t.Logf("cluster up in %s; %d messages, %d confirmed before the kill (%d not published again), %d repeats, %d retried calls, %d relay connections; test %s",
		clustered.Round(100*time.Millisecond), len(ids), len(confirmed), len(kept), repeats, ob.Counters().Retried, dials, time.Since(began).Round(100*time.Millisecond))
}
