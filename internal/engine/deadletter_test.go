package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

func TestNew(t *testing.T) {
	t.Parallel()
	m := dialect.OutgoingMessage{
		Seq: 42, ID: dialect.MessageID{0x01, 0x8f, 0xff}, PayloadType: "order.created",
		Payload: []byte(`{"id":1}`), Headers: []byte(`{"trace":"x"}`),
		CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC),
	}
	got := NewDeadLetter(9, m, errors.New("cannot parse"), 3)
	require.Equal(t, dialect.DeadLetter{
		PartitionID: 9, Seq: 42, MessageID: m.ID, PayloadType: "order.created",
		Payload: m.Payload, Headers: m.Headers, CreatedAt: m.CreatedAt,
		LastError: "cannot parse", Attempts: 3,
	}, got)

	require.Equal(t, "rejected", NewDeadLetter(9, m, nil, 1).LastError, "a nil cause still says why")

	long := NewDeadLetter(9, m, errors.New(strings.Repeat("x", dialect.MaxErrorTextLen+10)), 1)
	require.Len(t, long.LastError, dialect.MaxErrorTextLen, "the stored error is bounded")
}

func TestNewStoresAnyErrorText(t *testing.T) {
	t.Parallel()
	m := dialect.OutgoingMessage{Seq: 1, PayloadType: "t"}
	require.Equal(t, `bad\x00\xff`, NewDeadLetter(1, m, errors.New("bad\x00\xff"), 1).LastError)
	var typedNil *panickyError
	require.NotPanics(t, func() { NewDeadLetter(1, m, typedNil, 1) })
}

type panickyError struct{ msg string }

func (e *panickyError) Error() string { return e.msg }
