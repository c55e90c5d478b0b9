package outbox

import (
	"encoding/json"
	"fmt"
)

// NewMessage encodes v with c as the payload of a message of payloadType,
// for the typed handler that decodes it with the same codec
// (processor.Decoded). Set Key or Partition and Headers on the result.
// The payload type is checked when the message is enqueued, as any other.
func NewMessage(c Codec, payloadType string, v any) (Message, error) {
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
	return NewMessage(JSONCodec, payloadType, v)
}

// Codec turns values into payloads and back: typed handlers decode with
// it, NewMessage encodes with it. JSON is the one seqbox ships;
// another format (protobuf, msgpack, a versioned envelope) is a value
// with these two methods.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(payload []byte, v any) error
}

// JSONCodec is the encoding/json codec.
var JSONCodec Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
