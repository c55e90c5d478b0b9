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
)

// PartitionError is ErrNotParked or ErrUnknownPartition for one partition.
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

// Partitions lists parked partitions and resumes or skips them (the Park
// failure policy; docs/ARCHITECTURE.md, "Failure policy: dead-letter or
// park"). Get it from Admin.Partitions. The state is in the database, so
// an action taken here is seen by every process at its next poll, and at
// once by the process whose Outbox made the Admin.
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

// Skipped is the outcome of Skip: the partition as it was parked, and the
// head message that went to dead letters (zero when the head was gone).
type Skipped struct {
	Parked
	MessageID outbox.MessageID
}

// Parked lists the parked partitions of a queue, or of every queue when
// queue is "".
func (a *Partitions) Parked(ctx context.Context, queue string) ([]Parked, error) {
	list, err := a.s.ProcessorParkedList(ctx, &dialect.ProcessorParkedListParams{})
	if err != nil {
		return nil, fmt.Errorf("seqbox: list parked partitions: %w", err)
	}
	out := make([]Parked, 0, len(list))
	for _, p := range list {
		if queue == "" || p.Queue == queue {
			out = append(out, parked(p.Queue, p.Partition, p))
		}
	}
	return out, nil
}

// Resume retries a parked partition's head now: the mark, the attempt
// count and the error are cleared, and the head gets MaxAttempts fresh
// attempts. It returns the partition as it was parked.
func (a *Partitions) Resume(ctx context.Context, queue string, partition int) (Parked, error) {
	var was Parked
	pid, err := a.act(ctx, queue, partition, "resume", func(ctx context.Context, tx bun.Tx, p dialect.ProcessorParked) error {
		was = parked(queue, partition, p)
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

// Skip dead-letters a parked partition's head, moves the partition past
// it and clears the mark, in one transaction; the rest of the partition
// is then delivered in order. The dead letter keeps the head's attempts
// and last error, noting that an operator skipped it.
func (a *Partitions) Skip(ctx context.Context, queue string, partition int) (Skipped, error) {
	var out Skipped
	pid, err := a.act(ctx, queue, partition, "skip", func(ctx context.Context, tx bun.Tx, p dialect.ProcessorParked) error {
		out = Skipped{Parked: parked(queue, partition, p)}
		head, err := a.s.OutgoingList(ctx, &dialect.OutgoingListParams{Conn: tx, PartitionID: p.ID, AfterSeq: p.ProcessedSeq, Limit: 1})
		if err != nil {
			return err
		}
		u := dialect.ProcessorAdvance(p.ID, "", p.ProcessedSeq, nil)
		if len(head) > 0 {
			cause := fmt.Errorf("skipped by an operator while parked: %s", p.LastError)
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

// act runs fn on a parked partition under its row lock, in one
// transaction. Of two operators acting on one partition, the second waits
// for the first and then finds it not parked.
func (a *Partitions) act(ctx context.Context, queue string, partition int, action string,
	fn func(ctx context.Context, tx bun.Tx, p dialect.ProcessorParked) error) (int64, error) {
	fail := func(err error) error {
		return &PartitionError{Queue: queue, Partition: partition, Action: action, Err: err}
	}
	if queue == "" {
		return 0, fail(ErrUnknownPartition)
	}
	list, err := a.s.PartitionList(ctx, &dialect.PartitionListParams{Queue: queue})
	if err != nil {
		return 0, fmt.Errorf("seqbox: %s %s/%d: list partitions: %w", action, queue, partition, err)
	}
	var pid int64
	for _, p := range list {
		if p.Partition == partition {
			pid = p.ID
		}
	}
	if pid == 0 {
		return 0, fail(ErrUnknownPartition)
	}
	err = a.s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		lock, err := a.s.ProcessorParkedLock(ctx, &dialect.ProcessorLockParams{Conn: tx, PartitionID: pid})
		if err != nil {
			return err
		}
		if !lock.Locked {
			return fail(ErrNotParked)
		}
		p := lock.Parked
		p.ID = pid
		return fn(ctx, tx, p)
	})
	if err != nil {
		var pe *PartitionError
		if errors.As(err, &pe) {
			return 0, err
		}
		return 0, fmt.Errorf("seqbox: %s %s/%d: %w", action, queue, partition, err)
	}
	return pid, nil
}

func parked(queue string, partition int, p dialect.ProcessorParked) Parked {
	return Parked{Queue: queue, Partition: partition, HeadSeq: p.ProcessedSeq + 1, Attempts: p.Attempts,
		LastError: p.LastError, ParkedAt: p.ParkedAt}
}
