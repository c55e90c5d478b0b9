package redisrelay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	redisrelay "github.com/seqbox/seqbox/relay/redis"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// redisCluster is a private Redis Cluster of 3 masters and no replicas
// (docs/CLUSTERS.md): redis-server processes on ports and in directories
// of their own, each with an AOF fsynced on every write, so a master
// SIGKILLed and started again has every write it acknowledged.
type redisCluster struct {
	servers []*relaytest.Server
	addrs   []string
	admin   []*redis.Client // one per master, never through the cluster
	ids     []string        // node ids
	slots   [3][2]int       // each master's first and last slot
}

func startRedisCluster(ctx context.Context, t *testing.T) *redisCluster {
	bin := relaytest.Binary(t, "redis-server")
	ports := relaytest.FreePorts(t, 6) // 3 client ports, 3 cluster bus ports
	// The slots split as redis-cli --cluster create splits them.
	c := &redisCluster{slots: [3][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}}
	for i := range 3 {
		name := "m" + strconv.Itoa(i+1)
		c.addrs = append(c.addrs, "127.0.0.1:"+strconv.Itoa(ports[i]))
		c.servers = append(c.servers, relaytest.StartServer(t, name, bin,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[i]), "--dir", t.TempDir(),
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(ports[3+i]), "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
			"--appendonly", "yes", "--appendfsync", "always", "--save", ""))
		rc := redis.NewClient(&redis.Options{Addr: c.addrs[i], DialTimeout: time.Second, MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		c.admin = append(c.admin, rc)
	}
	for i, rc := range c.admin {
		var id string
		relaytest.WaitUntil(t, "redis-server "+c.addrs[i], func() (err error) {
			id, err = rc.Do(ctx, "CLUSTER", "MYID").Text()
			return err
		})
		c.ids = append(c.ids, id)
		require.NoError(t, rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", c.slots[i][0], c.slots[i][1]).Err())
	}
	for i := 1; i < 3; i++ {
		require.NoError(t, c.admin[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", ports[i], ports[3+i]).Err())
	}
	for i := range 3 {
		c.waitState(ctx, t, i, "ok")
	}
	return c
}

// waitState waits until master i says cluster_state:state with all 3
// masters known.
func (c *redisCluster) waitState(ctx context.Context, t *testing.T, i int, state string) {
	relaytest.WaitUntil(t, fmt.Sprintf("cluster_state:%s on %s", state, c.addrs[i]), func() error {
		info, err := c.admin[i].ClusterInfo(ctx).Result()
		if err == nil && !(strings.Contains(info, "cluster_state:"+state+"\r\n") && strings.Contains(info, "cluster_known_nodes:3\r\n")) {
			err = fmt.Errorf("CLUSTER INFO: %q", info)
		}
		return err
	})
}

// flags returns an error unless master i's view flags node id with flag
// (fail, …).
func (c *redisCluster) flags(ctx context.Context, i int, id, flag string) error {
	nodes, err := c.admin[i].ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == id {
			if slices.Contains(strings.Split(f[2], ","), flag) {
				return nil
			}
			return fmt.Errorf("%s flags %s as %s", c.addrs[i], id, f[2])
		}
	}
	return fmt.Errorf("%s does not know %s", c.addrs[i], id)
}

// owner is the master whose slots hold key.
func (c *redisCluster) owner(ctx context.Context, t *testing.T, key string) int {
	slot, err := c.admin[0].ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	for i, r := range c.slots {
		if int(slot) >= r[0] && int(slot) <= r[1] {
			return i
		}
	}
	t.Fatalf("slot %d of %s is nobody's", slot, key)
	return -1
}

// lossy is a go-redis hook on the relay's client, with a
// relaytest.Hold: the reply to the batch script that the hold takes
// reaches the relay as relaytest.ErrConfirmLost, as when the master dies
// before its reply arrives. It records what the script says when that
// batch is appended again: that its first id is already there (the master
// kept it through the kill) or that it appended it.
type lossy struct {
	hold  *relaytest.Hold
	held  atomic.Pointer[string] // the held batch's stream and first entry id
	again atomic.Int32           // againThere, againAppended, or 0 before the first reply
}

const (
	againThere = 1 + iota
	againAppended
)

func (l *lossy) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *lossy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (l *lossy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// The relay's script: EVALSHA (or EVAL) sha 1 stream entry-id n "id"
		// <seqbox id> …, the stream named prefix:queue:partition, the entry
		// id "<seq>-0".
		a := cmd.Args()
		if name := strings.ToLower(cmd.Name()); (name != "evalsha" && name != "eval") || len(a) < 8 {
			return next(ctx, cmd)
		}
		stream, _ := a[3].(string)
		entry, _ := a[4].(string)
		id, _ := a[7].(string)
		partition, _ := strconv.Atoi(stream[strings.LastIndex(stream, ":")+1:])
		seq, _ := strconv.ParseInt(strings.TrimSuffix(entry, "-0"), 10, 64)
		if held := l.held.Load(); held != nil && *held == stream+" "+entry {
			err := next(ctx, cmd)
			if res, rerr := cmd.(*redis.Cmd).Slice(); err == nil && rerr == nil && len(res) == 2 {
				again := int32(againAppended)
				added, _ := res[0].(int64)
				if refusal, _ := res[1].(string); added == 0 && strings.Contains(refusal, "equal or smaller than the target stream top item") {
					again = againThere
				}
				l.again.CompareAndSwap(0, again)
			}
			return err
		}
		if !l.hold.Wants(partition, seq) {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil || !l.hold.Take(partition, seq, id) {
			return err
		}
		key := stream + " " + entry
		l.held.Store(&key)
		cmd.SetErr(relaytest.ErrConfirmLost)
		return relaytest.ErrConfirmLost
	}
}

// TestClusterMasterKilled: a relay publishes through a cluster client to a
// Redis Cluster of 3 masters without replicas, and the master holding a
// partition's stream is SIGKILLed mid-stream, just after it acknowledged a
// batch whose reply is then kept from the relay. While it is down its
// partitions retry, and the partitions whose streams live on the other
// masters keep flowing, messages enqueued during the outage included
// (cluster-require-full-coverage no). It is started again from its AOF
// (appendfsync always): the relay, never restarted, appends the batch
// again, Redis refuses it as already there, the relay recognises it and
// goes on. Every stream ends holding each of its partition's messages
// once, in seq order, with no gap.
func TestClusterMasterKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startRedisCluster(ctx, t)

	// A prefix that puts partition 0's stream on one master and another
	// partition's on another: that master is killed.
	var prefix string
	var on [4]int // the master of each partition's stream
	for i := 0; ; i++ {
		prefix = "sbc" + strconv.Itoa(i)
		for p := range on {
			on[p] = c.owner(ctx, t, redisrelay.StreamPrefix(prefix)("orders", p))
		}
		if on[1] != on[0] || on[2] != on[0] || on[3] != on[0] {
			break
		}
	}
	victim := on[0]
	onVictim := func(p int) bool { return on[p] == victim }
	survivors := []int{(victim + 1) % 3, (victim + 2) % 3}
	t.Logf("partitions' streams on masters %v; master %d (%s) is killed", on, victim, c.addrs[victim])

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs, DialTimeout: time.Second})
	defer cc.Close()
	wrap := &lossy{hold: relaytest.NewHold(onVictim)}
	cc.AddHook(wrap)
	stream := redisrelay.StreamPrefix(prefix)
	h, err := redisrelay.Handler(redisrelay.Config{Client: cc, Stream: stream})
	require.NoError(t, err)
	db := relaytest.OpenSQLite(t, filepath.Join(t.TempDir(), "relay.db"))

	var more []outbox.MessageID
	ids := relaytest.MemberKilled(ctx, t, db, h, 400, wrap.hold, c.servers[victim].Kill,
		func(ob *seqbox.Outbox, lost outbox.MessageID) {
			for _, s := range survivors {
				relaytest.WaitUntil(t, "the other masters to flag the killed one as failed", func() error { return c.flags(ctx, s, c.ids[victim], "fail") })
			}
			// Enqueued while the master is down: the partitions on the others
			// take them.
			more = relaytest.Enqueue(ctx, t, ob, db, 100)
			var elsewhere, there []outbox.MessageID
			for i, id := range more {
				if onVictim(outbox.PartitionForKey("customer-"+strconv.Itoa(i%7), 4)) {
					there = append(there, id)
				} else {
					elsewhere = append(elsewhere, id)
				}
			}
			require.NoError(t, ob.WaitProcessed(ctx, elsewhere...))
			c.servers[victim].Start()
			for i := range 3 {
				c.waitState(ctx, t, i, "ok")
			}
			require.NoError(t, ob.WaitProcessed(ctx, append(there, lost)...))
		})

	require.Equal(t, int32(againThere), wrap.again.Load(),
		"appended again, the held batch was refused as already there: the master had kept it through the kill")
	checkStreams(ctx, t, cc, stream, 4, append(ids, more...))
}
