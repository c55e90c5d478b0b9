package processor

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/outbox"
)

// ErrUndecodable matches every DecodeError.
var ErrUndecodable = errors.New("seqbox: payload does not decode")

// DecodeError is a payload a typed handler could not decode. The message
// is dead-lettered (Reject) with it and never retried: the same bytes will
// never decode.
type DecodeError struct {
	ID          MessageID
	PayloadType string
	Err         error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("seqbox: message %s (%s) does not decode: %v", e.ID, e.PayloadType, e.Err)
}

func (e *DecodeError) Unwrap() error        { return e.Err }
func (e *DecodeError) Is(target error) bool { return target == ErrUndecodable }

// Typed is a delivery with its payload decoded into Value.
type Typed[T any] struct {
	Delivery
	Value T
}

func decode[T any](c outbox.Codec, d Delivery) (Typed[T], error) {
	td := Typed[T]{Delivery: d}
	if err := c.Unmarshal(d.Payload, &td.Value); err != nil {
		return td, Reject(&DecodeError{ID: d.ID, PayloadType: d.PayloadType, Err: err})
	}
	return td, nil
}

// Decoded is Leased with the payload decoded by c into a T; a payload that
// does not decode is dead-lettered with a *DecodeError, the handler not
// called. A nil codec or function makes a handler that Validate refuses.
func Decoded[T any](c outbox.Codec, fn func(ctx context.Context, d Typed[T]) error) Handler {
	if c == nil || fn == nil {
		return &handler{mode: ModeLeased}
	}
	return Leased(func(ctx context.Context, d Delivery) error {
		td, err := decode[T](c, d)
		if err != nil {
			return err
		}
		return fn(ctx, td)
	})
}

// DecodedTransactional is Transactional with the payload decoded by c.
func DecodedTransactional[T any](c outbox.Codec, fn func(ctx context.Context, tx bun.Tx, d Typed[T]) error) Handler {
	if c == nil || fn == nil {
		return &handler{mode: ModeTransactional}
	}
	return Transactional(func(ctx context.Context, tx bun.Tx, d Delivery) error {
		td, err := decode[T](c, d)
		if err != nil {
			return err
		}
		return fn(ctx, tx, td)
	})
}

// DecodedBatch is LeasedBatch with every payload decoded by c: values[i]
// is b.Messages[i] decoded. When a message does not decode, the handler
// gets the batch up to it (if any); once it has acked all of those, the
// undecodable message is dead-lettered and the partition goes on.
func DecodedBatch[T any](c outbox.Codec, fn func(ctx context.Context, b *Batch, values []T) error) Handler {
	if c == nil || fn == nil {
		return &handler{mode: ModeLeased}
	}
	return LeasedBatch(func(ctx context.Context, b *Batch) error {
		values := make([]T, 0, len(b.Messages))
		var bad error
		for _, d := range b.Messages {
			td, err := decode[T](c, d)
			if err != nil {
				bad = err
				break
			}
			values = append(values, td.Value)
		}
		if bad == nil {
			return fn(ctx, b, values)
		}
		// The handler sees only the decodable prefix; its acks and
		// rejections carry over, index for index.
		good := len(values)
		if good > 0 {
			sub := &Batch{Messages: b.Messages[:good], acked: b.acked, rejected: b.rejected}
			err := fn(ctx, sub, values)
			b.acked, b.rejected = sub.acked, sub.rejected
			if err != nil {
				return err
			}
			b.Ack(good) // nil acks all it was given
		}
		return bad
	})
}

// JSON is Decoded with the JSON codec: a leased handler of T values.
func JSON[T any](fn func(ctx context.Context, d Typed[T]) error) Handler {
	return Decoded(outbox.JSONCodec, fn)
}

// JSONBatch is DecodedBatch with the JSON codec.
func JSONBatch[T any](fn func(ctx context.Context, b *Batch, values []T) error) Handler {
	return DecodedBatch(outbox.JSONCodec, fn)
}

// JSONTransactional is DecodedTransactional with the JSON codec.
func JSONTransactional[T any](fn func(ctx context.Context, tx bun.Tx, d Typed[T]) error) Handler {
	return DecodedTransactional(outbox.JSONCodec, fn)
}
