package processor

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/configerr"
)

// Queue defaults. A zero field of QueueOptions takes its default; a
// negative value means "never" where a field allows it.
const (
	BatchSizeDefault = 100
	// BatchSizeMax bounds BatchSize: no leased batch holds more messages
	// (Purge leaves that many behind a live lease's cursor to its delivery).
	BatchSizeMax       = 10000
	MaxAttemptsDefault = 10
	// MaxAttemptsNever: the head is never dead-lettered; the partition waits
	// until the handler succeeds.
	MaxAttemptsNever      = -1
	RetryBaseDefault      = time.Second
	RetryMaxDefault       = 5 * time.Minute
	LeaseDefault          = 30 * time.Second
	LeaseHeadroomDefault  = 2 * time.Second
	HandlerTimeoutDefault = 30 * time.Second
	DedupWindowDefault    = 24 * time.Hour
	// DedupWindowMax bounds DedupWindow (about ten years).
	DedupWindowMax = 10 * 365 * 24 * time.Hour
)

// QueueOptions tune one queue's processing.
type QueueOptions struct {
	// BatchSize is the most messages per handler call. Defaults to 100.
	BatchSize int
	// MaxAttempts is how many failed deliveries of the head message send it
	// to dead letters; MaxAttemptsNever (any negative value) means never:
	// the partition waits for the handler to succeed. Defaults to 10.
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
	// OnFailure is what happens when the head exhausts MaxAttempts:
	// DeadLetter (the default) or Park.
	OnFailure FailurePolicy
	// Middleware wraps every handler call, the first outermost (Use).
	Middleware []Middleware
	// DedupWindow is how long a message's DedupKey keeps a later message
	// with the same key from being enqueued to this queue. Used by enqueue,
	// not by processing. Defaults to 24h.
	DedupWindow time.Duration
}

// FailurePolicy is what a queue does with a head message that failed
// MaxAttempts times (docs/ARCHITECTURE.md, "Failure policy: dead-letter or
// park"). A message the handler rejects (ErrRejected) is dead-lettered
// under either policy: the handler has said it can never succeed.
type FailurePolicy int

const (
	// DeadLetter copies the head to dead letters and moves on to the
	// next message of the partition (the default).
	DeadLetter FailurePolicy = iota
	// Park stops the partition at its head: nothing behind it is
	// delivered, by any process, until an operator resumes the partition
	// (the head is retried now) or skips the head (it is dead-lettered and
	// the partition moves on); see Admin. For consumers where a later
	// message must never overtake an earlier one.
	Park
)

// String names the policy as the CLI and the logs show it.
func (f FailurePolicy) String() string {
	switch f {
	case DeadLetter:
		return "dead-letter"
	case Park:
		return "park"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(f))
}

// QueueOption sets one queue option.
type QueueOption func(*QueueOptions)

// DefaultQueueOptions returns the defaults.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		BatchSize: BatchSizeDefault, MaxAttempts: MaxAttemptsDefault,
		RetryBase: RetryBaseDefault, RetryMax: RetryMaxDefault,
		Lease: LeaseDefault, LeaseHeadroom: LeaseHeadroomDefault,
		HandlerTimeout: HandlerTimeoutDefault, DedupWindow: DedupWindowDefault,
	}
}

// NewQueueOptions applies opts over the defaults. A nil option is
// skipped (the Builder reports it as a configuration error).
func NewQueueOptions(opts ...QueueOption) QueueOptions {
	o := DefaultQueueOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o.WithDefaults()
}

// WithDefaults fills zero fields with their defaults.
func (o QueueOptions) WithDefaults() QueueOptions {
	o.BatchSize = cmp.Or(o.BatchSize, BatchSizeDefault)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, MaxAttemptsDefault)
	o.RetryBase = cmp.Or(o.RetryBase, RetryBaseDefault)
	o.RetryMax = cmp.Or(o.RetryMax, max(RetryMaxDefault, o.RetryBase))
	o.Lease = cmp.Or(o.Lease, LeaseDefault)
	o.LeaseHeadroom = cmp.Or(o.LeaseHeadroom, min(LeaseHeadroomDefault, o.Lease/2))
	o.HandlerTimeout = cmp.Or(o.HandlerTimeout, HandlerTimeoutDefault)
	o.DedupWindow = cmp.Or(o.DedupWindow, DedupWindowDefault)
	return o
}

// deadLetters reports whether a head that failed attempts times goes to
// dead letters now.
func (o QueueOptions) deadLetters(attempts int) bool {
	return o.MaxAttempts > 0 && attempts >= o.MaxAttempts
}

// BatchSize sets the most messages per handler call (1..10000).
func BatchSize(n int) QueueOption { return func(o *QueueOptions) { o.BatchSize = n } }

// MaxAttempts sets the failures after which a message is dead-lettered;
// MaxAttemptsNever (negative) = never.
func MaxAttempts(n int) QueueOption { return func(o *QueueOptions) { o.MaxAttempts = n } }

// Retry sets the retry backoff base and cap.
func Retry(base, max time.Duration) QueueOption {
	return func(o *QueueOptions) { o.RetryBase, o.RetryMax = base, max }
}

// Lease sets the lease duration and the headroom kept for the ack.
func Lease(duration, headroom time.Duration) QueueOption {
	return func(o *QueueOptions) { o.Lease, o.LeaseHeadroom = duration, headroom }
}

// OnFailure sets what happens when the head exhausts MaxAttempts:
// DeadLetter (the default) or Park.
func OnFailure(policy FailurePolicy) QueueOption {
	return func(o *QueueOptions) { o.OnFailure = policy }
}

// HandlerTimeout sets a transactional handler's deadline.
func HandlerTimeout(d time.Duration) QueueOption {
	return func(o *QueueOptions) { o.HandlerTimeout = d }
}

// DedupWindow sets how long a dedup key holds (1ms..DedupWindowMax).
func DedupWindow(d time.Duration) QueueOption {
	return func(o *QueueOptions) { o.DedupWindow = d }
}

// ErrInvalidOptions matches every option validation error.
var ErrInvalidOptions = errors.New("seqbox: invalid queue options")

// Validate reports options that cannot work, naming the field; the error
// matches ErrInvalidOptions and ErrInvalidConfig.
func (o QueueOptions) Validate() error {
	bad := func(field, format string, args ...any) error {
		e := configerr.New(field, format, args...)
		e.Also = ErrInvalidOptions
		return e
	}
	switch {
	case o.BatchSize < 1 || o.BatchSize > BatchSizeMax:
		return bad("BatchSize", "%d: must be 1..%d", o.BatchSize, BatchSizeMax)
	case o.RetryBase <= 0 || o.RetryMax < o.RetryBase:
		return bad("RetryBase", "%v (max %v): need 0 < base <= max", o.RetryBase, o.RetryMax)
	case o.Lease < time.Millisecond*100:
		return bad("Lease", "%v: must be >= 100ms", o.Lease)
	case o.LeaseHeadroom <= 0 || o.LeaseHeadroom >= o.Lease:
		return bad("LeaseHeadroom", "%v (lease %v): need 0 < headroom < lease", o.LeaseHeadroom, o.Lease)
	case o.HandlerTimeout <= 0:
		return bad("HandlerTimeout", "%v: must be > 0", o.HandlerTimeout)
	case o.OnFailure != DeadLetter && o.OnFailure != Park:
		return bad("OnFailure", "%v: must be DeadLetter or Park", o.OnFailure)
	case o.DedupWindow < time.Millisecond || o.DedupWindow > DedupWindowMax:
		return bad("DedupWindow", "%v: must be 1ms..%v", o.DedupWindow, DedupWindowMax)
	case o.OnFailure == Park && o.MaxAttempts < 0:
		return bad("OnFailure", "Park with MaxAttemptsNever: a partition that never gives up never parks; set MaxAttempts")
	}
	for i, mw := range o.Middleware {
		if mw == nil {
			return bad("Middleware", "[%d] is nil", i)
		}
	}
	return nil
}
