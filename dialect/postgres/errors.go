package postgres

import (
	"errors"
	"strings"

	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// sqlState reads a PostgreSQL error's SQLSTATE from any driver without
// importing one: pgx and lib/pq expose SQLState(), pgdriver Field('C').
func sqlState(err error) string {
	var withState interface{ SQLState() string }
	var withField interface{ Field(byte) string }
	switch {
	case errors.As(err, &withState):
		return withState.SQLState()
	case errors.As(err, &withField):
		return withField.Field('C')
	}
	return ""
}

// isRetryable recognises serialization failures, deadlocks and lock
// timeouts.
func isRetryable(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// isDisconnect recognises a lost connection: class 08, or a backend
// terminated by an administrator (pg_terminate_backend) or a shutdown.
func isDisconnect(err error) bool {
	state := sqlState(err)
	switch {
	case strings.HasPrefix(state, "08"), state == "57P01", state == "57P02", state == "57P03":
		return true
	}
	return kit.IsNetworkError(err)
}
