package seqbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/outbox"
)

// Errors of the partition actions, matched with errors.Is; an action that
// returns one has changed nothing.
var (
	// ErrNotParked: the partition is not parked (never was, or another
	// operator resumed or skipped it a moment earlier).
	ErrNotParked = errors.New("seqbox: partition is not parked")
	// ErrUnknownPartition: the queue has no partition of that number in
	// the database.
	ErrUnknownPartition = errors.New("seqbox: no such queue partition")
	// ErrNotRetrying: RetryNow found no failed head waiting for a retry
	// (the head never failed or was delivered since, or the partition is
	// parked: Resume retries a parked head).
	ErrNotRetrying = errors.New("seqbox: partition is not retrying")
	// ErrPartitionBusy: a lease of the partition is live, so its head may
	// be being delivered right now; act again once the delivery ends (or
	// its lease expires).
	ErrPartitionBusy = errors.New("seqbox: partition's head is being delivered now")
	// ErrStateChanged: an action made conditional with IfUnchanged found
	// the partition in another state than the one shown (another operator
	// acted, or the head was delivered or failed again since).
	ErrStateChanged = errors.New("seqbox: partition changed since it was shown")
)

// ActionOption qualifies a partition action.
type ActionOption func(*actionOptions)

type actionOptions struct {
	unchanged *PartitionState
}

// IfUnchanged makes an action conditional on the state an operator was
// shown (from State or Failing): under the partition's row lock, if its
// state, head seq or attempts differ from shown, the action changes
// nothing and returns a *PartitionError with ErrStateChanged. Of two
// operators acting on what they both saw, one acts; the other learns
// what changed.
func IfUnchanged(shown PartitionState) ActionOption {
	return func(o *actionOptions) { o.unchanged = &shown }
}

// errNothingToSkip is Skip's refusal of a partition neither parked nor
// retrying. It matches ErrNotParked, which Skip returned before it took
// retrying partitions too, and ErrNotRetrying.
type errNothingToSkip struct{}

func (errNothingToSkip) Error() string { return "seqbox: partition is neither parked nor retrying" }

func (errNothingToSkip) Is(target error) bool {
	return target == ErrNotParked || target == ErrNotRetrying
}

// PartitionError is one of the errors above for one partition.
type PartitionError struct {
	Queue     string
	Partition int
	Action    string
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("seqbox: %s %s/%d: %v", e.Action, e.Queue, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// Partitions lists parked and retrying partitions and resumes, retries or
// skips them (the Park failure policy; docs/ARCHITECTURE.md, "Failure
// policy: dead-letter or park"). Get it from Admin.Partitions. The state is
// in the database, so an action taken here is seen by every process at its
// next poll, and at once by the process whose Outbox made the Admin.
type Partitions struct {
	s dialect.Dialect
	// resumed, when set, is told of a partition made leasable again.
	resumed func(partitionID int64)
}

// Parked is a parked partition and the head message it stopped at.
type Parked struct {
	Queue     string
	Partition int
	// HeadSeq is the seq of the head message that failed.
	HeadSeq   int64
	Attempts  int
	LastError string
	ParkedAt  time.Time
}

// Skipped is the outcome of Skip: the partition as it was (ParkedAt is
// zero for a retrying one, and State says which), and the head message
// that went to dead letters (zero when the head was gone).
type Skipped struct {
	Parked
	State     State
	MessageID outbox.MessageID
}

// State is a partition's state as an operator sees it.
type State string

// The states of PartitionState.
const (
	// StateOK: the head has not failed (or has been delivered since).
	StateOK State = "ok"
	// StateRetrying: the head failed and will be retried (at
	// NextAttemptAt, or now when that is zero): policy DeadLetter, or
	// Park before MaxAttempts.
	StateRetrying State = "retrying"
	// StateParked: the head failed MaxAttempts times under the Park
	// policy; nothing is delivered until an operator acts.
	StateParked State = "parked"
)

// The actions of PartitionState.Check, as PartitionError.Action names them.
const (
	ActionResume = "resume"
	ActionRetry  = "retry"
	ActionSkip   = "skip"
)

// PartitionState is a partition's head of line as an operator sees it.
type PartitionState struct {
	Queue     string
	Partition int
	State     State
	// HeadSeq is the seq of the head message (the next to deliver).
	HeadSeq   int64
	Attempts  int
	LastError string
	// NextAttemptAt is when a retrying head is retried; zero when it is
	// due now (or the partition is not retrying).
	NextAttemptAt time.Time
	// ParkedAt is when the partition was parked; zero when it is not.
	ParkedAt time.Time
	// InFlight: a lease of the partition is live, so the head may be
	// being delivered right now (RetryNow and Skip refuse it).
	InFlight bool
}

// Check returns the error action (ActionResume, ActionRetry or
// ActionSkip) would return for a partition in this state, nil when it
// would act: what a preview reports. The action itself checks again
// under the partition's row lock.
func (p PartitionState) Check(action string) error {
	var err error
	switch action {
	case ActionResume:
		if p.State != StateParked {
			err = ErrNotParked
		}
	// The state first: a partition whose head has not failed is "not
	// retrying" even while a delivery is in flight (the second of two
	// operators may find the first one's skip already being delivered).
	case ActionRetry:
		switch {
		case p.State != StateRetrying:
			err = ErrNotRetrying
		case p.InFlight:
			err = ErrPartitionBusy
		}
	case ActionSkip:
		switch {
		case p.State == StateOK:
			err = errNothingToSkip{}
		case p.InFlight:
			err = ErrPartitionBusy
		}
	default:
		return fmt.Errorf("seqbox: unknown partition action %q", action)
	}
	if err != nil {
		return &PartitionError{Queue: p.Queue, Partition: p.Partition, Action: action, Err: err}
	}
	return nil
}

// Failing lists the partitions that are parked or retrying a failed head,
// of a queue or of every queue when queue is "", in queue and partition
// order.
func (a *Partitions) Failing(ctx context.Context, queue string) ([]PartitionState, error) {
	list, err := a.s.ProcessorFailingList(ctx, &dialect.ProcessorFailingListParams{})
	if err != nil {
		return nil, dialect.Wrap(err, "list failing partitions")
	}
	out := make([]PartitionState, 0, len(list))
	for _, p := range list {
		if queue == "" || p.Queue == queue {
			out = append(out, partitionState(p.Queue, p.Partition, p))
		}
	}
	return out, nil
}

// State reads one partition's state without locking it (a preview; the
// actions read it again under the row lock). It returns a *PartitionError
// with ErrUnknownPartition for a partition the queue does not have.
func (a *Partitions) State(ctx context.Context, queue string, partition int) (PartitionState, error) {
	pid, err := a.partitionID(ctx, queue, partition, "read")
	if err != nil {
		return PartitionState{}, err
	}
	res, err := a.s.ProcessorAdminRead(ctx, &dialect.ProcessorAdminReadParams{PartitionID: pid})
	if err != nil {
		return PartitionState{}, dialect.Wrap(err, fmt.Sprintf("read %s/%d", queue, partition))
	}
	if !res.Found {
		return PartitionState{}, &PartitionError{Queue: queue, Partition: partition, Action: "read", Err: ErrUnknownPartition}
	}
	return partitionState(queue, partition, res.State), nil
}

// Parked lists the parked partitions of a queue, or of every queue when
// queue is "".
func (a *Partitions) Parked(ctx context.Context, queue string) ([]Parked, error) {
	list, err := a.s.ProcessorFailingList(ctx, &dialect.ProcessorFailingListParams{})
	if err != nil {
		return nil, dialect.Wrap(err, "list parked partitions")
	}
	out := make([]Parked, 0, len(list))
	for _, p := range list {
		if !p.ParkedAt.IsZero() && (queue == "" || p.Queue == queue) {
			out = append(out, parkedOf(p.Queue, p.Partition, p))
		}
	}
	return out, nil
}

// Resume retries a parked partition's head now: the mark, the attempt
// count and the error are cleared, and the head gets MaxAttempts fresh
// attempts. It returns the partition as it was parked.
func (a *Partitions) Resume(ctx context.Context, queue string, partition int, opts ...ActionOption) (Parked, error) {
	var was Parked
	pid, err := a.act(ctx, queue, partition, ActionResume, opts, func(ctx context.Context, tx bun.Tx, p dialect.ProcessorAdminState) error {
		was = parkedOf(queue, partition, p)
		u := dialect.ProcessorFailure(p.ID, "", p.ProcessedSeq, 0, "", 0, nil)
		u.Conn = tx
		return a.s.ProcessorUpdate(ctx, u)
	})
	if err != nil {
		return Parked{}, err
	}
	if a.resumed != nil {
		a.resumed(pid)
	}
	return was, nil
}

// RetryNow makes a retrying partition's head due now instead of at its
// next retry time, keeping its attempt count (so MaxAttempts still
// bounds it) and its last error. It returns the partition as it was. It
// refuses, changing nothing, a partition that is not retrying
// (ErrNotRetrying; Resume retries a parked one) or whose head may be being
// delivered now (ErrPartitionBusy), each in a *PartitionError.
func (a *Partitions) RetryNow(ctx context.Context, queue string, partition int, opts ...ActionOption) (PartitionState, error) {
	var was PartitionState
	pid, err := a.act(ctx, queue, partition, ActionRetry, opts, func(ctx context.Context, tx bun.Tx, p dialect.ProcessorAdminState) error {
		was = partitionState(queue, partition, p)
		// No retry delay: next_attempt_at is cleared, the rest kept.
		u := dialect.ProcessorFailure(p.ID, "", p.ProcessedSeq, p.Attempts, p.LastError, 0, nil)
		u.Conn = tx
		return a.s.ProcessorUpdate(ctx, u)
	})
	if err != nil {
		return PartitionState{}, err
	}
	if a.resumed != nil {
		a.resumed(pid)
	}
	return was, nil
}

// Skip dead-letters the head of a parked or retrying partition, moves the
// partition past it and clears the mark or the pending retry, in one
// transaction; the rest of the partition is then delivered in order. The
// dead letter keeps the head's attempts and last error, noting that an
// operator skipped it. It refuses, changing nothing, a partition that is
// neither parked nor retrying (an error matching both ErrNotParked and
// ErrNotRetrying) or whose head may be being delivered now
// (ErrPartitionBusy), each in a *PartitionError.
func (a *Partitions) Skip(ctx context.Context, queue string, partition int, opts ...ActionOption) (Skipped, error) {
	var out Skipped
	pid, err := a.act(ctx, queue, partition, ActionSkip, opts, func(ctx context.Context, tx bun.Tx, p dialect.ProcessorAdminState) error {
		st := partitionState(queue, partition, p)
		out = Skipped{Parked: parkedOf(queue, partition, p), State: st.State}
		head, err := a.s.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: tx, PartitionID: p.ID, AfterSeq: p.ProcessedSeq, Limit: 1})
		if err != nil {
			return err
		}
		u := dialect.ProcessorAdvance(p.ID, "", p.ProcessedSeq, nil)
		if len(head) > 0 {
			cause := fmt.Errorf("skipped by an operator while %s: %s", st.State, p.LastError)
			u = dialect.ProcessorAdvance(p.ID, "", head[0].Seq, []dialect.DeadLetter{engine.NewDeadLetter(p.ID, head[0], cause, p.Attempts)})
			out.MessageID = head[0].ID
		}
		u.Conn = tx
		return a.s.ProcessorUpdate(ctx, u)
	})
	if err != nil {
		return Skipped{}, err
	}
	if a.resumed != nil {
		a.resumed(pid)
	}
	return out, nil
}

// act runs fn on a partition under its row lock, in one transaction,
// when PartitionState.Check allows action there. Of two operators acting
// on one partition, the second waits for the first and then checks the
// row as the first left it.
func (a *Partitions) act(ctx context.Context, queue string, partition int, action string, opts []ActionOption,
	fn func(ctx context.Context, tx bun.Tx, p dialect.ProcessorAdminState) error) (int64, error) {
	var o actionOptions
	for _, opt := range opts {
		if opt == nil {
			return 0, &PartitionError{Queue: queue, Partition: partition, Action: action, Err: errors.New("nil ActionOption")}
		}
		opt(&o)
	}
	pid, err := a.partitionID(ctx, queue, partition, action)
	if err != nil {
		return 0, err
	}
	err = a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := a.s.ProcessorAdminRead(ctx, &dialect.ProcessorAdminReadParams{Conn: tx, PartitionID: pid, Lock: true})
		if err != nil {
			return err
		}
		if !res.Found {
			return &PartitionError{Queue: queue, Partition: partition, Action: action, Err: ErrUnknownPartition}
		}
		p := res.State
		p.ID = pid
		now := partitionState(queue, partition, p)
		if was := o.unchanged; was != nil && (was.State != now.State || was.HeadSeq != now.HeadSeq || was.Attempts != now.Attempts) {
			return &PartitionError{Queue: queue, Partition: partition, Action: action, Err: fmt.Errorf(
				"%w (shown: %s, head seq %d, %d attempts; now: %s, head seq %d, %d attempts)", ErrStateChanged,
				was.State, was.HeadSeq, was.Attempts, now.State, now.HeadSeq, now.Attempts)}
		}
		if err := now.Check(action); err != nil {
			return err
		}
		return fn(ctx, tx, p)
	})
	if err != nil {
		var pe *PartitionError
		if errors.As(err, &pe) {
			return 0, err
		}
		return 0, dialect.Wrap(err, fmt.Sprintf("%s %s/%d", action, queue, partition))
	}
	return pid, nil
}

// partitionID finds a queue partition's id, or returns a *PartitionError
// with ErrUnknownPartition.
func (a *Partitions) partitionID(ctx context.Context, queue string, partition int, action string) (int64, error) {
	if queue == "" {
		return 0, &PartitionError{Queue: queue, Partition: partition, Action: action, Err: ErrUnknownPartition}
	}
	list, err := a.s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return 0, dialect.Wrap(err, fmt.Sprintf("%s %s/%d: list partitions", action, queue, partition))
	}
	for _, p := range list {
		if p.Partition == partition {
			return p.ID, nil
		}
	}
	return 0, &PartitionError{Queue: queue, Partition: partition, Action: action, Err: ErrUnknownPartition}
}

func parkedOf(queue string, partition int, p dialect.ProcessorAdminState) Parked {
	return Parked{Queue: queue, Partition: partition, HeadSeq: p.ProcessedSeq + 1, Attempts: p.Attempts,
		LastError: p.LastError, ParkedAt: p.ParkedAt}
}

func partitionState(queue string, partition int, p dialect.ProcessorAdminState) PartitionState {
	st := PartitionState{Queue: queue, Partition: partition, State: StateOK, HeadSeq: p.ProcessedSeq + 1,
		Attempts: p.Attempts, LastError: p.LastError, NextAttemptAt: p.NextAttemptAt, ParkedAt: p.ParkedAt, InFlight: p.Leased}
	switch {
	case !p.ParkedAt.IsZero():
		st.State = StateParked
	case p.LastError != "" || !p.NextAttemptAt.IsZero():
		// As outbox.PartitionStats.Retrying: a failure was recorded.
		st.State = StateRetrying
	}
	return st
}
