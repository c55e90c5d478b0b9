package kafkarelay_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	kafkarelay "github.com/seqbox/seqbox/relay/kafka"
	"github.com/seqbox/seqbox/relay/relaykit/relaytest"
)

// TestTransactionalOnceAcrossLostAcks: the transactional relay delivers
// the queue whole to a read_committed consumer, each key in seq order;
// a batch whose ack is lost after its commit is not produced again.
func TestTransactionalOnceAcrossLostAcks(t *testing.T) { testOnceAcrossLostAcks(t, true) }

// TestTransactionalAbortsARefusedBatch: Kafka refuses a produce request to
// one partition (franz-go then fails the transaction's producer ID): the
// transaction is aborted, the partition retries, and a read_committed
// consumer sees every message once and in order.
func TestTransactionalAbortsARefusedBatch(t *testing.T) { testRefusedRecordRetried(t, true) }

// TestRefusedRecordIsDeadLettered: a record the client refuses by itself
// (larger than ProducerBatchMaxBytes) in the middle of a batch. The relay
// acks the batch's prefix before it (the transactional relay aborts its
// transaction and commits that prefix in a new one), so the partition's
// head is the refused message itself, and MaxAttempts(1) dead-letters it
// at its first failure; the batch's first message would be dead-lettered
// instead if the prefix were not acked. Every other message arrives once,
// each key in seq order; a read_uncommitted consumer of the transactional
// relay's topic also sees the aborted attempt's records.
func TestRefusedRecordIsDeadLettered(t *testing.T) {
	t.Parallel()
	for _, transactional := range []bool{false, true} {
		t.Run("transactional="+strconv.FormatBool(transactional), func(t *testing.T) {
			ctx, c, db := setup(t)
			opts := []kgo.Opt{kgo.ProducerBatchMaxBytes(16 << 10)}
			if transactional {
				opts = append(opts, kgo.TransactionalID("relay"))
			}
			h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), opts...),
				Topic: kafkarelay.Topic(topic), Transactional: transactional})
			require.NoError(t, err)
			ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).Queue("orders", 1, h, processor.BatchSize(50),
				processor.Retry(time.Millisecond, 5*time.Millisecond), processor.MaxAttempts(1)).Start(ctx)
			require.NoError(t, err)
			defer ob.Stop(ctx)
			const refused = 20
			msgs := make([]outbox.Message, 100) // relaytest.Enqueue's, but one too large
			for i := range msgs {
				msgs[i] = outbox.Message{Key: "customer-" + strconv.Itoa(i%7), PayloadType: "order.v1", Payload: []byte(strconv.Itoa(i)),
					Headers: map[string]string{"traceparent": "00-abc-def-01", "n": strconv.Itoa(i)}}
			}
			msgs[refused].Payload = bytes.Repeat([]byte("x"), 32<<10)
			ids, err := ob.EnqueueBatch(ctx, db, "orders", msgs)
			require.NoError(t, err)
			require.NoError(t, ob.WaitProcessed(ctx, ids...))
			letter, err := ob.Admin().DeadLetters().Get(ctx, ids[refused])
			require.NoError(t, err, "the refused message is dead-lettered")
			require.Contains(t, letter.LastError, "MESSAGE_TOO_LARGE")
			require.Equal(t, int64(1), ob.Counters().DeadLettered, "only the refused message")
			ids[refused] = outbox.MessageID{} // must not arrive
			require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), true), ids, 1), "each message once")
			if transactional {
				require.Positive(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), false), ids, 1), "the aborted attempt's records")
			}
		})
	}
}

// TestTransactionalIDAbortsWhatWasLeftOpen: a relay process died inside a
// transaction (here, a client that began one, produced, and was never
// heard of again; its transaction timeout is longer than this test). A
// read_committed consumer cannot read past that open transaction, until
// a relay with the same transactional ID starts: Kafka then aborts it at
// once. The old producer, were it still alive, is fenced off.
func TestTransactionalIDAbortsWhatWasLeftOpen(t *testing.T) {
	t.Parallel()
	ctx, c, db := setup(t)
	dead := newClient(t, c.ListenAddrs(), kgo.TransactionalID("relay"), kgo.TransactionTimeout(10*time.Minute))
	require.NoError(t, dead.BeginTransaction())
	require.NoError(t, dead.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("left open")}).FirstErr())

	h, err := kafkarelay.Handler(kafkarelay.Config{Client: newClient(t, c.ListenAddrs(), kgo.TransactionalID("relay")),
		Topic: kafkarelay.Topic(topic), Transactional: true})
	require.NoError(t, err)
	ob := start(ctx, t, db, h)
	ids := relaytest.Enqueue(ctx, t, ob, db, 100)
	require.NoError(t, ob.WaitProcessed(ctx, ids...))
	require.Zero(t, checkTopic(t, read(ctx, t, c.ListenAddrs(), true), ids, 4), "the open transaction aborted: its record is not there")
	require.Error(t, dead.EndTransaction(ctx, kgo.TryCommit), "the old producer is fenced off")
}
