package outbox

import (
	"fmt"

	"github.com/seqbox/seqbox/processor"
)

// NewMessage encodes v with c as the payload of a message of payloadType,
// for the typed handler that decodes it with the same codec
// (processor.Decoded). Set Key or Partition and Headers on the result.
// The payload type is checked when the message is enqueued, as any other.
func NewMessage(c processor.Codec, payloadType string, v any) (Message, error) {
	if c == nil {
		return Message{}, fmt.Errorf("%w: nil codec", ErrUnencodable)
	}
	payload, err := c.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("%w: encode %s: %w", ErrUnencodable, payloadType, err)
	}
	return Message{PayloadType: payloadType, Payload: payload}, nil
}

// JSONMessage is NewMessage with the JSON codec, for processor.JSON handlers.
func JSONMessage(payloadType string, v any) (Message, error) {
	return NewMessage(processor.JSONCodec, payloadType, v)
}
