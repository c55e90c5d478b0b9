package rabbitmqrelay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/processor"
	rabbitmqrelay "github.com/seqbox/seqbox/relay/rabbitmq"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

const queueEnv = "SEQBOX_RELAY_QUEUE"

// TestRelayWorker is the relay process TestRelaySurvivesKills starts and
// SIGKILLs; run any other way it returns at once.
func TestRelayWorker(t *testing.T) {
	file := os.Getenv(relaytest.WorkerEnv)
	if file == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err)
	defer conn.Close()
	name := os.Getenv(queueEnv)
	h, err := rabbitmqrelay.Handler(rabbitmqrelay.Config{Connection: conn, RoutingKey: func(processor.Delivery) string { return name }})
	require.NoError(t, err)
	relaytest.RunWorker(ctx, t, file, h)
}

// TestRelaySurvivesKills: relay processes SIGKILLed mid-stream and
// restarted lose nothing and keep each partition's first arrivals in seq
// order; what a killed relay published and never acked arrives again,
// with the same message-id (at-least-once).
func TestRelaySurvivesKills(t *testing.T) {
	ctx, conn, _, name := setup(t)
	declare(t, conn, name)
	file := filepath.Join(t.TempDir(), "killed.db")
	ids := relaytest.Backlog(ctx, t, file, 3000)
	landed := relaytest.KillAndRestart(t, "TestRelayWorker", file, []string{queueEnv + "=" + name}, 3)
	require.Equal(t, 3, landed, "kills that landed on a running relay")
	repeats := checkQueue(t, drain(t, conn, name), ids)
	require.Positive(t, repeats, "each kill loses a published batch's acks")
	t.Logf("%d kills landed, %d repeats arrived", landed, repeats)
}
