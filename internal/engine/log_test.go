package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/processor"
)

// logStore keeps the records of a logger and of every logger derived from
// it, each with its attributes as text (the handler's own included).
type logStore struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

type captureHandler struct {
	store *logStore
	attrs []slog.Attr
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	h.store.records = append(h.store.records, rec)
	return nil
}

func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return captureHandler{store: h.store, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h captureHandler) WithGroup(string) slog.Handler { return h }

// find returns the one record with msg.
func (s *logStore) find(t *testing.T, msg string) logRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []logRecord
	for _, r := range s.records {
		if r.msg == msg {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "records %q among %v", msg, s.records)
	return found[0]
}

// outcomeFake leases one batch and records outcomes as the database would,
// giving each dead letter a row id (from 100 on).
// With refuseText it refuses, once, an outcome whose letters carry a
// handler's error text, as a database refusing a value would.
type outcomeFake struct {
	baseFake
	lease      dialect.ProcessorLeaseResult
	acks       []dialect.ProcessorUpdateParams
	nextID     int64
	refuseText bool
}

func (f *outcomeFake) ProcessorLease(context.Context, *dialect.ProcessorLeaseParams) (dialect.ProcessorLeaseResult, error) {
	return f.lease, nil
}

func (f *outcomeFake) ProcessorAck(_ context.Context, p *dialect.ProcessorUpdateParams) error {
	if f.refuseText && len(p.DeadLetters) > 0 && p.DeadLetters[0].LastError != unrecordedErrorText {
		f.refuseText = false
		return errRefused
	}
	for i := range p.DeadLetters {
		p.DeadLetters[i].ID = 100 + f.nextID
		f.nextID++
	}
	f.acks = append(f.acks, *p)
	return nil
}

// TestOutcomeLogsNameTheMessage: each log line of a retry, a dead letter
// and a park names what an operator needs to find it: the queue, the
// partition, the message's seq and id, and the dead letter's id (what
// `seqbox dlq --id` and seqbox.DeadLetters take).
func TestOutcomeLogsNameTheMessage(t *testing.T) {
	t.Parallel()
	first := dialect.OutgoingMessage{Seq: 5, ID: dialect.MessageID{0x01, 0x92, 0xf1, 0xa4, 15: 0x05}, PayloadType: "t"}
	second := dialect.OutgoingMessage{Seq: 6, ID: dialect.MessageID{0x01, 0x92, 0xf1, 0xa4, 15: 0x06}, PayloadType: "t"}
	base := func(id dialect.MessageID, seq int64) map[string]string {
		return map[string]string{"component": "processor", "queue": "q", "partition": "1",
			"seq": strconv.FormatInt(seq, 10), "message_id": id.String()}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	runOn := func(t *testing.T, fake *outcomeFake, h processor.Handler, opts []processor.QueueOption, msgs ...dialect.OutgoingMessage) (*logStore, *outcomeFake) {
		t.Helper()
		store := &logStore{}
		fake.lease = dialect.ProcessorLeaseResult{Leased: true, State: dialect.ProcessorState{ProcessedSeq: 4}, Messages: msgs}
		p := NewPool(fake, PoolConfig{Owner: "me", Logger: slog.New(captureHandler{store: store})},
			[]QueueSpec{testSpec("q", h, []int64{41, 42}, opts...)})
		_, err := p.tasks[42].stepLeased(context.Background())
		require.NoError(t, err)
		require.Len(t, fake.acks, 1)
		return store, fake
	}
	run := func(t *testing.T, h processor.Handler, opts []processor.QueueOption, msgs ...dialect.OutgoingMessage) (*logStore, *outcomeFake) {
		t.Helper()
		return runOn(t, &outcomeFake{}, h, opts, msgs...)
	}
	// only drops the attributes a test does not pin (retry_in is random).
	only := func(r logRecord, keys map[string]string) map[string]string {
		out := map[string]string{}
		for k := range keys {
			if v, ok := r.attrs[k]; ok {
				out[k] = v
			}
		}
		return out
	}

	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		store, _ := run(t, processor.Leased(func(context.Context, processor.Delivery) error { return errBoom }), []processor.QueueOption{processor.MaxAttempts(5)}, first)
		r := store.find(t, "handler failed; will retry")
		require.Equal(t, slog.LevelWarn, r.level)
		want := with(base(first.ID, first.Seq), "attempts", "1", "error", "boom")
		require.Equal(t, want, only(r, want))
		require.Contains(t, r.attrs, "retry_in")
		require.NotContains(t, r.attrs, "dead_letter_id", "nothing was dead-lettered")
	})

	t.Run("dead letters", func(t *testing.T) {
		t.Parallel()
		h := processor.LeasedBatch(func(_ context.Context, b *processor.Batch) error {
			b.Reject(errors.New("bad input"))
			return errBoom
		})
		store, fake := run(t, h, []processor.QueueOption{processor.MaxAttempts(1)}, first, second)
		require.Len(t, fake.acks[0].DeadLetters, 2)

		r := store.find(t, "message rejected by its handler; dead-lettered")
		require.Equal(t, slog.LevelWarn, r.level)
		want := with(base(first.ID, first.Seq), "dead_letter_id", "100", "error", "bad input")
		require.Equal(t, want, only(r, want))

		r = store.find(t, "message dead-lettered after max attempts")
		require.Equal(t, slog.LevelError, r.level)
		want = with(base(second.ID, second.Seq), "dead_letter_id", "101", "attempts", "1", "error", "boom")
		require.Equal(t, want, only(r, want))
	})

	t.Run("dead letter recorded without its text", func(t *testing.T) {
		t.Parallel()
		store, fake := runOn(t, &outcomeFake{refuseText: true}, processor.Leased(func(context.Context, processor.Delivery) error { return errBoom }),
			[]processor.QueueOption{processor.MaxAttempts(1)}, first)
		require.Equal(t, unrecordedErrorText, fake.acks[0].DeadLetters[0].LastError)
		r := store.find(t, "message dead-lettered after max attempts")
		want := with(base(first.ID, first.Seq), "dead_letter_id", "100")
		require.Equal(t, want, only(r, want), "the id of the letter written on the second try")
	})

	t.Run("park", func(t *testing.T) {
		t.Parallel()
		store, _ := run(t, processor.Leased(func(context.Context, processor.Delivery) error { return errBoom }),
			[]processor.QueueOption{processor.MaxAttempts(1), processor.OnFailure(processor.Park)}, first)
		r := store.find(t, "partition parked: its head failed max attempts; resume or skip it (seqbox partitions)")
		require.Equal(t, slog.LevelError, r.level)
		want := with(base(first.ID, first.Seq), "attempts", "1", "error", "boom")
		require.Equal(t, want, only(r, want))
		require.NotContains(t, r.attrs, "dead_letter_id", "a parked head is not dead-lettered")
	})
}

func (r logRecord) String() string { return fmt.Sprintf("%s %q %v", r.level, r.msg, r.attrs) }
