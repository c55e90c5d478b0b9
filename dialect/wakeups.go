package dialect

import (
	"context"
	"errors"
)

// WakeupListener is an optional Dialect capability, found by type
// assertion (PostgreSQL): the partitions that other processes' committed
// transactions enqueued to or sequenced, as they commit.
type WakeupListener interface {
	// ListenWakeups calls w's functions as notifications from processes
	// other than self arrive, until ctx ends, reconnecting by itself. It
	// returns an error matching ErrNoListener at once when it has no way
	// to listen.
	ListenWakeups(ctx context.Context, self string, w Wakeups) error
}

// WakeupNotifier is the sending side of WakeupListener: self tells the
// listening processes which partitions got incoming or sequenced rows.
type WakeupNotifier interface {
	NotifyWakeups(ctx context.Context, self string, incoming, sequenced []int64) error
}

// Wakeups receives what a WakeupListener hears. A nil id list means every
// partition (the notification did not fit).
type Wakeups struct {
	// Incoming: partitions with newly committed incoming rows.
	Incoming func(partitionIDs []int64)
	// Sequenced: partitions with newly sequenced rows.
	Sequenced func(partitionIDs []int64)
	// Listening is called each time the listener has (re)connected:
	// whatever committed before may not have been heard.
	Listening func()
}

// ErrNoListener: the dialect cannot listen for notifications (PostgreSQL
// without postgres.WithListener, or with a listener for another driver).
var ErrNoListener = errors.New("seqbox: cannot listen for notifications")
