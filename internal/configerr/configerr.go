// Package configerr builds outbox.ConfigError values, the one shape of a
// configuration error, for every package that validates settings.
package configerr

import (
	"errors"
	"fmt"

	"github.com/seqbox/seqbox/outbox"
)

// ErrInvalid matches every configuration error (outbox.ErrInvalidConfig).
var ErrInvalid = outbox.ErrInvalidConfig

// Error is outbox.ConfigError.
type Error = outbox.ConfigError

// New builds an Error for field.
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
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
