package conformance

import (
	"context"
	"errors"
	"sync"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// testDeliveryKey: the Key a message was enqueued with reaches its handler
// exactly (any bytes), in leased and transactional mode; a message without
// one has ""; a dead letter keeps the key and its replay carries it, to
// the same partition. A key counts toward the payload size limit.
func testDeliveryKey(e *Env) {
	var mu sync.Mutex
	keys := map[outbox.MessageID]string{}
	parts := map[outbox.MessageID]int{}
	var fixed bool
	record := func(d processor.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		keys[d.ID], parts[d.ID] = d.Key, d.Partition
	}
	ob := e.Start(e.Builder().MaxPayloadBytes(1024).
		Queue("keyed", 4, processor.Leased(func(ctx context.Context, d processor.Delivery) error {
			mu.Lock()
			reject := string(d.Payload) == "bad" && !fixed
			mu.Unlock()
			if reject {
				return processor.Reject(errors.New("not yet"))
			}
			record(d)
			return nil
		})).
		Queue("keyedtx", 2, processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
			record(d)
			return nil
		})))
	odd := "tenant-42/\xff\x00/ünïcode" // a key is bytes: invalid UTF-8 and NUL round-trip
	send := func(queue string, m outbox.Message) outbox.MessageID {
		id, err := ob.Enqueue(e.Ctx, e.DB, queue, m)
		require.NoError(e.T, err)
		return id
	}
	keyed := send("keyed", outbox.Message{Key: odd, PayloadType: "t", Payload: []byte("ok")})
	plain := send("keyed", outbox.Message{Partition: 1, PayloadType: "t", Payload: []byte("ok")})
	bad := send("keyed", outbox.Message{Key: "order-7", PayloadType: "t", Payload: []byte("bad")})
	tx := send("keyedtx", outbox.Message{Key: odd, PayloadType: "t"})
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, keyed, plain, bad, tx))

	mu.Lock()
	require.Equal(e.T, odd, keys[keyed])
	require.Equal(e.T, outbox.PartitionForKey(odd, 4), parts[keyed])
	require.Equal(e.T, "", keys[plain])
	require.Equal(e.T, odd, keys[tx], "transactional mode too")
	fixed = true
	mu.Unlock()

	dl := ob.DeadLetters()
	letter, err := dl.Get(e.Ctx, bad)
	require.NoError(e.T, err)
	require.Equal(e.T, "order-7", letter.Key)
	changed, err := dl.Replay(e.Ctx, deadletter.IDs(letter.ID))
	require.NoError(e.T, err)
	require.NoError(e.T, ob.WaitProcessed(e.Ctx, changed.ReplayIDs...))
	mu.Lock()
	require.Equal(e.T, "order-7", keys[changed.ReplayIDs[0]], "the replay carries the key")
	require.Equal(e.T, outbox.PartitionForKey("order-7", 4), parts[changed.ReplayIDs[0]], "to the original partition")
	mu.Unlock()

	before := e.Settled(ob)
	big := make([]byte, 1000)
	_, err = ob.Enqueue(e.Ctx, e.DB, "keyed", outbox.Message{Key: string(big[:100]), PayloadType: "t", Payload: big[:1000]})
	require.ErrorIs(e.T, err, outbox.ErrPayloadTooLarge, "the key counts toward the limit")
	require.Equal(e.T, before, e.Counts())
}
