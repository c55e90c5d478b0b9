// Package relaykit holds what seqbox's own relay modules (relay/nats,
// relay/redis, relay/rabbitmq, relay/kafka) share. It is a module of its own so that
// they need none of the core's internal packages; it is not meant for use
// outside this repository and carries no compatibility promise: its API
// changes with the relays' needs, in any release.
package relaykit

import (
	"context"
	"maps"

	"github.com/seqbox/seqbox/processor"
)

// WithContextHeaders returns a batch's deliveries with the headers fn
// returns for ctx over their own (copies: the batch is not changed); msgs
// as they are when fn is nil or returns none.
func WithContextHeaders(ctx context.Context, fn func(context.Context, string) map[string]string, msgs []processor.Delivery) []processor.Delivery {
	if fn == nil || len(msgs) == 0 {
		return msgs
	}
	extra := fn(ctx, msgs[0].Queue)
	if len(extra) == 0 {
		return msgs
	}
	out := make([]processor.Delivery, len(msgs))
	for i, d := range msgs {
		h := make(map[string]string, len(d.Headers)+len(extra))
		maps.Copy(h, d.Headers)
		maps.Copy(h, extra)
		d.Headers = h
		out[i] = d
	}
	return out
}
