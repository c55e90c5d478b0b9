package kafkarelay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkarelay "github.com/seqbox/seqbox/relay/kafka"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// The worker learns the parent test's cluster (its brokers' addresses)
// and, for the transactional relay, its transactional ID.
const (
	brokersEnv = "SEQBOX_RELAY_BROKERS"
	txnIDEnv   = "SEQBOX_RELAY_TXN_ID"
)

// TestRelayWorker is the relay process the kill tests start and SIGKILL;
// run any other way it returns at once.
func TestRelayWorker(t *testing.T) {
	file := os.Getenv(relaytest.WorkerEnv)
	if file == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := kafkarelay.Config{Topic: kafkarelay.Topic(topic)}
	var opts []kgo.Opt
	if id := os.Getenv(txnIDEnv); id != "" {
		opts, cfg.Transactional = append(opts, kgo.TransactionalID(id)), true
	}
	cfg.Client = newClient(t, strings.Split(os.Getenv(brokersEnv), ","), opts...)
	h, err := kafkarelay.Handler(cfg)
	require.NoError(t, err)
	relaytest.RunWorker(ctx, t, file, h)
}

// TestRelaySurvivesKills: relay processes SIGKILLed mid-stream and
// restarted lose nothing and keep each key's first arrivals in seq order;
// what a killed relay produced and never acked, the next one produces
// again, with the same seqbox-id (at-least-once: Kafka has no idempotency
// key that outlives a producer).
func TestRelaySurvivesKills(t *testing.T) {
	t.Parallel()
	ctx, c, _ := setup(t)
	file := filepath.Join(t.TempDir(), "killed.db")
	ids := relaytest.Backlog(ctx, t, file, 3000)
	landed := relaytest.KillAndRestart(t, "TestRelayWorker", file, []string{brokersEnv + "=" + strings.Join(c.ListenAddrs(), ",")}, 3)
	require.Equal(t, 3, landed, "kills that landed on a running relay")
	repeats := checkTopic(t, read(ctx, t, c.ListenAddrs(), false), ids, 4)
	require.Positive(t, repeats, "each kill loses a produced batch's acks")
	t.Logf("%d kills landed, %d repeats arrived", landed, repeats)
}

// TestTransactionalSurvivesKills: the same with the transactional relay
// (two kills, a smaller backlog: its batches take turns, so it is slower),
// every worker with the same transactional ID (a restarted process aborts
// what its predecessor left open). A read_committed consumer gets every
// message, each key's first arrivals in seq order, and repeats too: a
// killed relay's last batches were committed in Kafka and never acked in
// seqbox, and transactions do not stop the next relay from committing
// them again.
func TestTransactionalSurvivesKills(t *testing.T) {
	t.Parallel()
	ctx, c, _ := setup(t)
	file := filepath.Join(t.TempDir(), "killed.db")
	ids := relaytest.Backlog(ctx, t, file, 2000)
	env := []string{brokersEnv + "=" + strings.Join(c.ListenAddrs(), ","), txnIDEnv + "=relay-1"}
	landed := relaytest.KillAndRestart(t, "TestRelayWorker", file, env, 2)
	require.Equal(t, 2, landed, "kills that landed on a running relay")
	repeats := checkTopic(t, read(ctx, t, c.ListenAddrs(), true), ids, 4)
	require.Positive(t, repeats, "a batch committed in Kafka whose seqbox ack died with its process is committed again")
	t.Logf("%d kills landed, %d repeats arrived", landed, repeats)
}
