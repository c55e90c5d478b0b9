package dialect

import (
	"errors"
	"strings"

	"github.com/seqbox/seqbox/outbox"
)

// Errors every dialect maps its driver errors onto, matched with errors.Is.
var (
	// ErrRetryable marks a transient conflict (serialization failure,
	// deadlock, SQLITE_BUSY): the operation may be retried at once.
	ErrRetryable = errors.New("seqbox: retryable database conflict")
	// ErrInvalidPrefix is returned for a table prefix that is not a safe identifier.
	ErrInvalidPrefix = errors.New("seqbox: invalid table prefix")
	// ErrLeaseLost is returned by a guarded processor update when another
	// owner holds the partition now.
	ErrLeaseLost = errors.New("seqbox: processor lease lost")
)

// ErrPartitionCountMismatch matches *PartitionCountError (outbox's).
var ErrPartitionCountMismatch = outbox.ErrPartitionCountMismatch

// PartitionCountError is outbox.PartitionCountError.
type PartitionCountError = outbox.PartitionCountError

// OpError is an error with what seqbox was doing when it happened. Its
// text carries the "seqbox: " prefix once, even when the cause's own text
// has it (a sentinel such as ErrRetryable). Match the cause with errors.Is.
type OpError struct {
	Op  string
	Err error
}

// Wrap returns err with what seqbox was doing, or nil for a nil err.
func Wrap(err error, op string) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Err: err}
}

func (e *OpError) Error() string {
	return "seqbox: " + e.Op + ": " + strings.TrimPrefix(ErrorString(e.Err), "seqbox: ")
}

func (e *OpError) Unwrap() error { return e.Err }
