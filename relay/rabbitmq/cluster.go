package rabbitmqrelay

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DialCluster returns a Config.Dial for a RabbitMQ cluster whose nodes
// listen at urls (amqp:// or amqps://, one per node): each call tries the
// nodes in turn, beginning with the one after the node it last connected
// to, and returns the first connection that opens, or an error joining
// every node's (passwords redacted). The node a closed connection was on,
// the likeliest to be gone, is so tried last: a relay whose node died
// goes on through another node without a restart. Publish to a quorum
// queue (replicated on every node) for the messages to outlive a node;
// see docs/CLUSTERS.md.
//
// config is amqp.DialConfig's; its zero value dials as amqp.Dial does.
// Give it a short Dial, such as amqp.DefaultDial(2*time.Second), so that
// a node that does not answer is passed soon (amqp091 waits 30 s by
// default). Its Properties and TLSClientConfig are copied for each dial
// (amqp091 writes into them: the TLS ServerName is each node's host).
// config.Recovery must be nil, or every dial fails with ErrConfig: the
// relay opens a new connection itself, to another node if need be, where
// amqp091's recovery would keep one that waits for its own node.
func DialCluster(urls []string, config amqp.Config) func() (*amqp.Connection, error) {
	urls = slices.Clone(urls)
	var next atomic.Int64 // the node to try first
	return func() (*amqp.Connection, error) {
		switch {
		case len(urls) == 0:
			return nil, fmt.Errorf("%w: DialCluster without a URL", ErrConfig)
		case config.Recovery != nil:
			return nil, fmt.Errorf("%w: DialCluster with amqp.Config.Recovery: the relay reconnects by itself", ErrConfig)
		}
		first := int(next.Load())
		errs := make([]error, 0, len(urls))
		for k := range urls {
			i := (first + k) % len(urls)
			c := config
			c.Properties = maps.Clone(config.Properties)
			if config.TLSClientConfig != nil {
				c.TLSClientConfig = config.TLSClientConfig.Clone()
			}
			conn, err := amqp.DialConfig(urls[i], c)
			if err == nil {
				next.Store(int64((i + 1) % len(urls)))
				return conn, nil
			}
			errs = append(errs, fmt.Errorf("node %s: %w", redacted(urls[i]), err))
		}
		return nil, errors.Join(errs...)
	}
}

// redacted is an AMQP URL without its password, for an error message.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}
