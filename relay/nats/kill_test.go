package natsrelay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	natsrelay "github.com/seqbox/seqbox/relay/nats"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

const streamEnv = "SEQBOX_RELAY_STREAM"

// TestRelayWorker is the relay process TestRelaySurvivesKills starts and
// SIGKILLs; run any other way it returns at once.
func TestRelayWorker(t *testing.T) {
	file := os.Getenv(relaytest.WorkerEnv)
	if file == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(natsURL(), nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	name := os.Getenv(streamEnv)
	h, err := natsrelay.Handler(natsrelay.Config{JetStream: js, Subject: natsrelay.SubjectPrefix(name, false), Stream: name})
	require.NoError(t, err)
	relaytest.RunWorker(ctx, t, file, h)
}

// TestRelaySurvivesKills: relay processes SIGKILLed mid-stream and
// restarted leave the stream holding every message once, per partition in
// order: what a killed relay published and never acked, the next one
// publishes again, and the stream drops it by Nats-Msg-Id.
func TestRelaySurvivesKills(t *testing.T) {
	ctx, js, _, name := setup(t)
	stream := createStream(ctx, t, js, name)
	file := filepath.Join(t.TempDir(), "killed.db")
	ids := relaytest.Backlog(ctx, t, file, 3000)
	landed := relaytest.KillAndRestart(t, "TestRelayWorker", file, []string{streamEnv + "=" + name}, 3)
	require.Equal(t, 3, landed, "kills that landed on a running relay")
	checkStream(t, stored(ctx, t, stream), ids, name)
}
