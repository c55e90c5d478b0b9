// Package handling is the contract between package processor, where an
// application builds its handlers and queue options, and the engine that
// runs them. processor's values satisfy these interfaces through exported
// methods of unexported types, so none of this is part of any public API
// (docs/ARCHITECTURE.md, "The public surface").
package handling

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/configerr"
)

// Handler is what processor's handler constructors return.
type Handler interface {
	// Transactional reports a handler that runs inside the ack transaction.
	Transactional() bool
	// Validate reports a handler that cannot run (built from a nil function).
	Validate() error
	// Bind returns the handler wrapped in the middleware of opts (the
	// queue's options, defaults first); options of other kinds are ignored.
	Bind(opts []Option) Runner
}

// Runner runs one handler call.
type Runner interface {
	// Run calls the handler (through its middleware) once for a batch and
	// reports how far it got. A panic in the handler or a middleware is
	// recovered into Result.Err; what was acked before it still counts.
	Run(ctx context.Context, call *Call) Result
}

// Call is one handler call: a partition's batch, in seq order, and in
// transactional mode the transaction that will ack it.
type Call struct {
	Queue     string
	Partition int
	Tx        *bun.Tx
	Messages  []Message
	// Attempts counts earlier failed deliveries of the batch's head.
	Attempts int
}

// Message is one delivery as the engine reads it.
type Message struct {
	ID          dialect.MessageID
	Key         string
	Seq         int64
	PayloadType string
	Payload     []byte
	Headers     map[string]string
	EnqueuedAt  time.Time
}

// Result is what a call did: the first Acked messages are done, those in
// Rejected (by index, all below Acked) go to dead letters, and Err is the
// call's error (nil: every message acked).
type Result struct {
	Acked    int
	Rejected map[int]error
	Err      error
}

// Option is what processor's queue options are.
type Option interface {
	// ApplyTo sets the option's fields in o and records their names in
	// o.Set.
	ApplyTo(o *Options)
}

// Failure policies (processor.FailurePolicy).
const (
	DeadLetter = 0
	Park       = 1
)

// Defaults and bounds of the queue options; processor exports them.
const (
	BatchSizeDefault      = 100
	BatchSizeMax          = 10000
	MaxAttemptsDefault    = 10
	RetryBaseDefault      = time.Second
	RetryMaxDefault       = 5 * time.Minute
	LeaseDefault          = 30 * time.Second
	LeaseHeadroomDefault  = 2 * time.Second
	HandlerTimeoutDefault = 30 * time.Second
	DedupWindowDefault    = 24 * time.Hour
	DedupWindowMax        = 10 * 365 * 24 * time.Hour
)

// Options are one queue's resolved options.
type Options struct {
	BatchSize, MaxAttempts int
	RetryBase, RetryMax    time.Duration
	Lease, LeaseHeadroom   time.Duration
	HandlerTimeout         time.Duration
	OnFailure              int
	DedupWindow            time.Duration
	// Set names the options applied (e.g. "Lease"), so that one that does
	// not apply to the queue can be refused; Resolve forgets the defaults'.
	Set map[string]bool
	// Problems are what options found wrong with their own arguments
	// (a nil middleware), reported by Validate.
	Problems []Problem
}

// Problem is an option's complaint about its argument.
type Problem struct{ Option, Reason string }

// ErrInvalidOptions matches every queue option error (processor.ErrInvalidOptions).
var ErrInvalidOptions = errors.New("seqbox: invalid queue options")

// Resolve applies defaults then own over the built-in defaults. Only own's
// options count as set: a default that does not apply to a queue (a lease
// on a transactional queue) is not an error, the queue's own is.
func Resolve(defaults, own []Option) Options {
	var o Options
	for _, opt := range defaults {
		if opt != nil {
			opt.ApplyTo(&o)
		}
	}
	o.Set = nil
	for _, opt := range own {
		if opt != nil {
			opt.ApplyTo(&o)
		}
	}
	return o.withDefaults()
}

func (o Options) withDefaults() Options {
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

// DeadLetters reports whether a head that failed attempts times goes to
// dead letters (or parks) now.
func (o Options) DeadLetters(attempts int) bool {
	return o.MaxAttempts > 0 && attempts >= o.MaxAttempts
}

// Validate returns every option that cannot work, each naming its field
// (under field, e.g. "Queue(orders)"); mode is the handler's (transactional
// or not), handler false for a queue registered for enqueueing only.
func (o Options) Validate(field string, handler, transactional bool) []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		e := configerr.New(field+"."+name, format, args...)
		e.Also = ErrInvalidOptions
		errs = append(errs, e)
	}
	for _, p := range o.Problems {
		bad(p.Option, "%s", p.Reason)
	}
	if o.BatchSize < 1 || o.BatchSize > BatchSizeMax {
		bad("BatchSize", "%d: must be 1..%d", o.BatchSize, BatchSizeMax)
	}
	if o.RetryBase <= 0 || o.RetryMax < o.RetryBase {
		bad("Retry", "base %v, max %v: need 0 < base <= max", o.RetryBase, o.RetryMax)
	}
	if o.Lease < 100*time.Millisecond {
		bad("Lease", "%v: must be >= 100ms", o.Lease)
	}
	if o.LeaseHeadroom <= 0 || o.LeaseHeadroom >= o.Lease {
		bad("Lease", "headroom %v, lease %v: need 0 < headroom < lease", o.LeaseHeadroom, o.Lease)
	}
	if o.HandlerTimeout <= 0 {
		bad("HandlerTimeout", "%v: must be > 0", o.HandlerTimeout)
	}
	if o.OnFailure != DeadLetter && o.OnFailure != Park {
		bad("OnFailure", "%d: must be DeadLetter or Park", o.OnFailure)
	}
	if o.DedupWindow < time.Millisecond || o.DedupWindow > DedupWindowMax {
		bad("DedupWindow", "%v: must be 1ms..%v", o.DedupWindow, DedupWindowMax)
	}
	if o.OnFailure == Park && o.MaxAttempts < 0 {
		bad("OnFailure", "Park with MaxAttemptsNever: a partition that never gives up never parks; set MaxAttempts")
	}
	// A setting that does not apply is an error, not silently ignored.
	switch {
	case !handler:
		for _, name := range []string{"BatchSize", "MaxAttempts", "Retry", "Lease", "HandlerTimeout", "OnFailure", "Use"} {
			if o.Set[name] {
				bad(name, "does not apply to a queue registered for enqueueing only (no handler); only DedupWindow does")
			}
		}
	case transactional:
		if o.Set["Lease"] {
			bad("Lease", "does not apply to a transactional handler (it holds a row lock, not a lease); use HandlerTimeout")
		}
	default:
		if o.Set["HandlerTimeout"] {
			bad("HandlerTimeout", "does not apply to a leased handler (its deadline is the lease minus its headroom); use Lease")
		}
	}
	return errs
}

// Invalid is the error of a handler built from a nil function.
func Invalid(what string) error { return fmt.Errorf("%w: %s", ErrInvalidHandler, what) }

// ErrRejected matches every error processor.Reject makes.
var ErrRejected = errors.New("seqbox: message rejected")

// ErrInvalidHandler matches a handler that cannot run (processor.ErrInvalidHandler).
var ErrInvalidHandler = errors.New("seqbox: invalid handler")
