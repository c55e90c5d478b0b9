package processor

import (
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/handling"
)

// Queue option defaults and bounds. Every option not given takes its
// default; a negative MaxAttempts means "never".
const (
	// BatchSizeDefault is the most messages per handler call.
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

// FailurePolicy is what a queue does with a head message that failed
// MaxAttempts times (docs/ARCHITECTURE.md, "Failure policy: dead-letter or
// park"). A message the handler rejects (ErrRejected) is dead-lettered
// under either policy: the handler has said it can never succeed.
type FailurePolicy int

const (
	// DeadLetter copies the head to dead letters and moves on to the
	// next message of the partition (the default).
	DeadLetter FailurePolicy = 0
	// Park stops the partition at its head: nothing behind it is
	// delivered, by any process, until an operator resumes the partition
	// (the head is retried now) or skips the head (it is dead-lettered and
	// the partition moves on). For consumers where a later message must
	// never overtake an earlier one.
	Park FailurePolicy = 1
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

// QueueOption tunes one queue (Builder.Queue) or every queue
// (Builder.QueueDefaults). An option that does not apply to the queue's
// handler (Lease on a transactional queue, HandlerTimeout on a leased one,
// anything but DedupWindow on a queue without a handler) is a
// configuration error when given on the queue itself; among QueueDefaults
// it is left out where it does not apply. Only this package implements it.
type QueueOption interface {
	queueOption()
}

// ErrInvalidOptions matches every queue option error; the error also
// matches ErrInvalidConfig and names the option.
var ErrInvalidOptions = handling.ErrInvalidOptions

// option is every QueueOption but Use.
type option struct {
	name  string
	apply func(o *handling.Options)
}

func (o *option) queueOption() {}

// ApplyTo sets the option in o.
func (o *option) ApplyTo(opts *handling.Options) {
	o.apply(opts)
	set(opts, o.name)
}

func set(o *handling.Options, name string) {
	if o.Set == nil {
		o.Set = map[string]bool{}
	}
	o.Set[name] = true
}

// BatchSize sets the most messages per handler call (1..BatchSizeMax).
// Defaults to BatchSizeDefault (100).
func BatchSize(n int) QueueOption {
	return &option{"BatchSize", func(o *handling.Options) { o.BatchSize = n }}
}

// MaxAttempts sets the failed deliveries after which the head message is
// dead-lettered (or its partition parked, OnFailure); MaxAttemptsNever
// (any negative value) means never: the partition waits until the handler
// succeeds. Defaults to MaxAttemptsDefault (10).
func MaxAttempts(n int) QueueOption {
	return &option{"MaxAttempts", func(o *handling.Options) { o.MaxAttempts = n }}
}

// Retry shapes the retry delay: full jitter over base*2^(n-1), capped at
// max. Defaults to RetryBaseDefault (1s) and RetryMaxDefault (5m).
func Retry(base, max time.Duration) QueueOption {
	return &option{"Retry", func(o *handling.Options) { o.RetryBase, o.RetryMax = base, max }}
}

// Lease sets how long a leased batch is owned and the headroom kept back
// for the ack: the handler's deadline is duration-headroom. Leased
// handlers only. Defaults to LeaseDefault (30s) and LeaseHeadroomDefault
// (2s).
func Lease(duration, headroom time.Duration) QueueOption {
	return &option{"Lease", func(o *handling.Options) { o.Lease, o.LeaseHeadroom = duration, headroom }}
}

// OnFailure sets what happens when the head exhausts MaxAttempts:
// DeadLetter (the default) or Park.
func OnFailure(policy FailurePolicy) QueueOption {
	return &option{"OnFailure", func(o *handling.Options) { o.OnFailure = int(policy) }}
}

// HandlerTimeout sets a transactional handler's deadline (it holds a row
// lock and a connection). Transactional handlers only. Defaults to
// HandlerTimeoutDefault (30s).
func HandlerTimeout(d time.Duration) QueueOption {
	return &option{"HandlerTimeout", func(o *handling.Options) { o.HandlerTimeout = d }}
}

// DedupWindow sets how long a message's DedupKey keeps a later message
// with the same key from being enqueued to the queue (1ms..DedupWindowMax).
// Used by enqueue, so it applies to queues without a handler too. Defaults
// to DedupWindowDefault (24h).
func DedupWindow(d time.Duration) QueueOption {
	return &option{"DedupWindow", func(o *handling.Options) { o.DedupWindow = d }}
}
