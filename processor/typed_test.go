package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/seqbox/seqbox/internal/handling"
	"github.com/stretchr/testify/require"
)

type order struct {
	ID    int    `json:"id"`
	Total string `json:"total"`
}

func deliveriesOf(payloads ...string) *Batch {
	b := &Batch{}
	for i, p := range payloads {
		b.Messages = append(b.Messages, Delivery{ID: MessageID{byte(i + 1)}, PayloadType: "order.v1", Payload: []byte(p)})
	}
	return b
}

// TestJSONDecodes: a typed handler gets values; a payload that does not
// decode is rejected (dead-lettered, never retried) with a *DecodeError
// and the handler is not called for it.
func TestJSONDecodes(t *testing.T) {
	t.Parallel()
	var got []order
	h := JSON(func(ctx context.Context, d Typed[order]) error {
		got = append(got, d.Value)
		require.Equal(t, "order.v1", d.PayloadType, "the delivery comes with the value")
		return nil
	})
	require.NoError(t, h.(handling.Handler).Validate())
	b := deliveriesOf(`{"id":1,"total":"9.50"}`, `{"id":2`, `{"id":3}`)
	err := h.(*handler).leased(context.Background(), b)
	require.ErrorIs(t, err, ErrRejected)
	require.ErrorIs(t, err, ErrUndecodable)
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, b.Messages[1].ID, de.ID)
	require.Equal(t, []order{{ID: 1, Total: "9.50"}}, got)
	require.Equal(t, 1, b.Acked(), "stops at the undecodable message: order holds")
}

// TestJSONBatch: the batch form gets the decodable prefix; once it acked
// all of it the undecodable message is rejected; its own acks, rejections
// and errors carry over.
func TestJSONBatch(t *testing.T) {
	t.Parallel()
	var got []order
	h := JSONBatch(func(ctx context.Context, b *Batch, values []order) error {
		require.Len(t, b.Messages, len(values))
		got = append(got, values...)
		return nil
	})
	b := deliveriesOf(`{"id":1}`, `{"id":2}`, `not json`, `{"id":4}`)
	err := h.(*handler).leased(context.Background(), b)
	require.ErrorIs(t, err, ErrUndecodable)
	require.Equal(t, []order{{ID: 1}, {ID: 2}}, got)
	require.Equal(t, 2, b.Acked(), "the prefix is acked, the rejection then takes the third")

	all := deliveriesOf(`{"id":1}`, `{"id":2}`)
	got = nil
	require.NoError(t, h.(*handler).leased(context.Background(), all))
	require.Len(t, got, 2)

	errLater := errors.New("later")
	partial := JSONBatch(func(ctx context.Context, b *Batch, values []order) error {
		b.Ack(1)
		return errLater
	})
	b = deliveriesOf(`{"id":1}`, `{"id":2}`, `nope`)
	require.ErrorIs(t, partial.(*handler).leased(context.Background(), b), errLater, "the handler's error wins over the decode failure behind it")
	require.Equal(t, 1, b.Acked())

	first := deliveriesOf(`nope`, `{"id":2}`)
	called := false
	require.ErrorIs(t, JSONBatch(func(context.Context, *Batch, []order) error { called = true; return nil }).(*handler).leased(context.Background(), first), ErrUndecodable)
	require.False(t, called, "nothing decodable before it: the handler is not called")
}

func TestDecodedRefusesNil(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, Decoded[order](nil, func(context.Context, Typed[order]) error { return nil }).(handling.Handler).Validate(), ErrInvalidHandler)
	require.ErrorIs(t, JSON[order](nil).(handling.Handler).Validate(), ErrInvalidHandler)
	require.ErrorIs(t, JSONBatch[order](nil).(handling.Handler).Validate(), ErrInvalidHandler)
	require.ErrorIs(t, JSONTransactional[order](nil).(handling.Handler).Validate(), ErrInvalidHandler)
}
