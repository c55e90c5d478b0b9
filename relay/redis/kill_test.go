package redisrelay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	redisrelay "github.com/seqbox/seqbox/relay/redis"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

const prefixEnv = "SEQBOX_RELAY_PREFIX"

// TestRelayWorker is the relay process TestRelaySurvivesKills starts and
// SIGKILLs; run any other way it returns at once.
func TestRelayWorker(t *testing.T) {
	file := os.Getenv(relaytest.WorkerEnv)
	if file == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rc.Close()
	h, err := redisrelay.Handler(redisrelay.Config{Client: rc, Stream: redisrelay.StreamPrefix(os.Getenv(prefixEnv))})
	require.NoError(t, err)
	relaytest.RunWorker(ctx, t, file, h)
}

// TestRelaySurvivesKills: relay processes SIGKILLed mid-stream and
// restarted leave every partition's stream holding each message once, in
// seq order: what a killed relay appended and never acked, the next one
// is refused and recognises.
func TestRelaySurvivesKills(t *testing.T) {
	ctx, rc, _, prefix := setup(t)
	file := filepath.Join(t.TempDir(), "killed.db")
	ids := relaytest.Backlog(ctx, t, file, 3000)
	landed := relaytest.KillAndRestart(t, "TestRelayWorker", file, []string{prefixEnv + "=" + prefix}, 3)
	require.Equal(t, 3, landed, "kills that landed on a running relay")
	checkStreams(ctx, t, rc, redisrelay.StreamPrefix(prefix), 4, ids)
}
