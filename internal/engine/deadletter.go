// Dead-letter records written by an outcome, and the replays of dead
// letters an ack resolves.

package engine

import (
	"bytes"
	"encoding/json"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
)

// replaysAcked returns the ids of the first n messages that replay a dead
// letter (deadletter.ReplayOfHeader) and were acked, not dead-lettered:
// their letters become resolved with this outcome.
func replaysAcked(msgs []dialect.OutgoingMessage, n int, dead map[int]bool) []dialect.MessageID {
	var out []dialect.MessageID
	for i := 0; i < n && i < len(msgs); i++ {
		if isReplay(msgs[i].Headers) && !dead[i] {
			out = append(out, msgs[i].ID)
		}
	}
	return out
}

// isReplay reports a message that replays a dead letter
// (deadletter.ReplayOfHeader) from its stored headers.
func isReplay(headers []byte) bool {
	if len(headers) == 0 || !bytes.Contains(headers, []byte(deadletter.ReplayOfHeader)) {
		return false
	}
	var h map[string]string
	if json.Unmarshal(headers, &h) != nil {
		return false
	}
	_, ok := h[deadletter.ReplayOfHeader]
	return ok
}

// NewDeadLetter copies an outgoing message into a dead-letter record. The
// cause's text is made storable on every database (dialect.ErrorText): it
// is data from anywhere and must never stop the record from being written.
func NewDeadLetter(partitionID int64, m dialect.OutgoingMessage, cause error, attempts int) dialect.DeadLetter {
	msg := "rejected"
	if cause != nil {
		msg = dialect.ErrorString(cause)
	}
	return dialect.DeadLetter{
		PartitionID: partitionID, Seq: m.Seq, MessageID: m.ID, Key: m.Key, PayloadType: m.PayloadType,
		Payload: m.Payload, Headers: m.Headers, CreatedAt: m.CreatedAt, LastError: dialect.ErrorText(msg), Attempts: attempts,
	}
}
