package outbox

import (
	"errors"
	"fmt"
)

// MessageID is a message's client-generated UUIDv7: one identity from
// producer to handler to dead letter, usable as an idempotency key
// downstream. String gives its canonical UUID text; ParseMessageID reads it.
type MessageID [16]byte

// String formats the id as a canonical UUID.
func (id MessageID) String() string {
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return string(out)
}

// ErrInvalidMessageID is returned by ParseMessageID.
var ErrInvalidMessageID = errors.New("seqbox: invalid message id")

// ParseMessageID reads a canonical UUID text (as String writes it; upper
// case hex is accepted).
func ParseMessageID(s string) (MessageID, error) {
	var id MessageID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("%w: %q: want a UUID like 0192f1a4-7b3c-7d2e-9f00-1a2b3c4d5e6f", ErrInvalidMessageID, s)
	}
	hex := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	for i := range id {
		hi, ok1 := unhex(hex[2*i])
		lo, ok2 := unhex(hex[2*i+1])
		if !ok1 || !ok2 {
			return MessageID{}, fmt.Errorf("%w: %q: not hexadecimal", ErrInvalidMessageID, s)
		}
		id[i] = hi<<4 | lo
	}
	return id, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// PartitionCountError reports a queue registered with another partition count.
type PartitionCountError struct {
	Queue      string
	Registered int
	Requested  int
}

func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("seqbox: queue %q is registered with %d partitions, not %d (the count is fixed at first registration)",
		e.Queue, e.Registered, e.Requested)
}

// ErrPartitionCountMismatch matches *PartitionCountError.
var ErrPartitionCountMismatch = errors.New("seqbox: partition count mismatch")

// Is matches ErrPartitionCountMismatch.
func (e *PartitionCountError) Is(target error) bool { return target == ErrPartitionCountMismatch }
