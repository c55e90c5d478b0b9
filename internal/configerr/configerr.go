// Package configerr is the one shape of a configuration error, shared by
// every package that validates settings; outbox.ConfigError is this type.
package configerr

import (
	"errors"
	"fmt"
)

// ErrInvalid matches every configuration error (outbox.ErrInvalidConfig).
var ErrInvalid = errors.New("seqbox: invalid configuration")

// Error names the setting that cannot work and why; it matches ErrInvalid
// and, when set, Also (a package's own sentinel).
type Error struct {
	// Field is the setting's path in seqbox.Config, e.g. "Sequencer.Workers"
	// or "Queues[orders].Options.BatchSize".
	Field  string
	Reason string
	Also   error
}

// New builds an Error for field.
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("seqbox: invalid configuration: %s: %s", e.Field, e.Reason)
}

// Is matches ErrInvalid and Also.
func (e *Error) Is(target error) bool {
	return target == ErrInvalid || (e.Also != nil && target == e.Also)
}

// In returns err with its field placed under parent ("Sequencer" +
// "Workers" → "Sequencer.Workers"); an error of another kind becomes an
// Error naming parent.
func In(parent string, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		c := *ce
		c.Field = parent + "." + ce.Field
		return &c
	}
	return &Error{Field: parent, Reason: err.Error()}
}
