package processor

import (
	"errors"
	"fmt"
	"time"
)

// Queue defaults.
const (
	BatchSizeDefault      = 100
	MaxAttemptsDefault    = 10
	RetryBaseDefault      = time.Second
	RetryMaxDefault       = 5 * time.Minute
	LeaseDefault          = 30 * time.Second
	LeaseHeadroomDefault  = 2 * time.Second
	HandlerTimeoutDefault = 30 * time.Second
)

// QueueOptions tune one queue's processing.
type QueueOptions struct {
	// BatchSize is the most messages per handler call. Defaults to 100.
	BatchSize int
	// MaxAttempts is how many failed deliveries of the head message send it
	// to dead letters; 0 means never (the partition waits for the handler to
	// succeed). Defaults to 10.
	MaxAttempts int
	// RetryBase and RetryMax shape the retry delay: full jitter over
	// RetryBase*2^(n-1), capped at RetryMax. Default 1s and 5m.
	RetryBase, RetryMax time.Duration
	// Lease is how long a leased batch is owned; LeaseHeadroom is kept back
	// for the ack, so the handler's deadline is Lease-LeaseHeadroom.
	// Default 30s and 2s.
	Lease, LeaseHeadroom time.Duration
	// HandlerTimeout is the deadline of a transactional handler call, which
	// holds a row lock and a connection. Defaults to 30s.
	HandlerTimeout time.Duration
}

// QueueOption sets one queue option.
type QueueOption func(*QueueOptions)

// DefaultQueueOptions returns the defaults.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		BatchSize: BatchSizeDefault, MaxAttempts: MaxAttemptsDefault,
		RetryBase: RetryBaseDefault, RetryMax: RetryMaxDefault,
		Lease: LeaseDefault, LeaseHeadroom: LeaseHeadroomDefault,
		HandlerTimeout: HandlerTimeoutDefault,
	}
}

// NewQueueOptions applies opts over the defaults.
func NewQueueOptions(opts ...QueueOption) QueueOptions {
	o := DefaultQueueOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// BatchSize sets the most messages per handler call (1..10000).
func BatchSize(n int) QueueOption { return func(o *QueueOptions) { o.BatchSize = n } }

// MaxAttempts sets the failures after which a message is dead-lettered; 0 = never.
func MaxAttempts(n int) QueueOption { return func(o *QueueOptions) { o.MaxAttempts = n } }

// Retry sets the retry backoff base and cap.
func Retry(base, max time.Duration) QueueOption {
	return func(o *QueueOptions) { o.RetryBase, o.RetryMax = base, max }
}

// Lease sets the lease duration and the headroom kept for the ack.
func Lease(duration, headroom time.Duration) QueueOption {
	return func(o *QueueOptions) { o.Lease, o.LeaseHeadroom = duration, headroom }
}

// HandlerTimeout sets a transactional handler's deadline.
func HandlerTimeout(d time.Duration) QueueOption {
	return func(o *QueueOptions) { o.HandlerTimeout = d }
}

// ErrInvalidOptions matches every option validation error.
var ErrInvalidOptions = errors.New("seqbox: invalid queue options")

// Validate reports options that cannot work.
func (o QueueOptions) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.BatchSize < 1 || o.BatchSize > 10000:
		return bad("batch size %d: must be 1..10000", o.BatchSize)
	case o.MaxAttempts < 0:
		return bad("max attempts %d: must be >= 0 (0 = never dead-letter)", o.MaxAttempts)
	case o.RetryBase <= 0 || o.RetryMax < o.RetryBase:
		return bad("retry base %v / max %v: need 0 < base <= max", o.RetryBase, o.RetryMax)
	case o.Lease < time.Millisecond*100 || o.LeaseHeadroom <= 0 || o.LeaseHeadroom >= o.Lease:
		return bad("lease %v / headroom %v: need lease >= 100ms and 0 < headroom < lease", o.Lease, o.LeaseHeadroom)
	case o.HandlerTimeout <= 0:
		return bad("handler timeout %v: must be > 0", o.HandlerTimeout)
	}
	return nil
}
