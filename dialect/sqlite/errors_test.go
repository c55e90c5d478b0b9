package sqlite

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// codedError is shaped like modernc's *sqlite.Error.
type codedError struct{ code int }

func (e codedError) Error() string { return fmt.Sprintf("sqlite error code %d", e.code) }
func (e codedError) Code() int     { return e.code }

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"SQLITE_BUSY", codedError{5}, true},
		{"SQLITE_BUSY_SNAPSHOT (extended)", codedError{5 | 2<<8}, true},
		{"SQLITE_LOCKED", codedError{6}, true},
		{"SQLITE_LOCKED_SHAREDCACHE (extended)", codedError{6 | 1<<8}, true},
		{"wrapped SQLITE_BUSY", fmt.Errorf("exec: %w", codedError{5}), true},
		{"SQLITE_CONSTRAINT", codedError{19}, false},
		// Only the primary code (low byte) of an extended code counts.
		{"SQLITE_CONSTRAINT_UNIQUE (extended)", codedError{19 | 8<<8}, false},
		{"SQLITE_IOERR_DIR_FSYNC has 5 in the high byte only", codedError{10 | 5<<8}, false},
		{"mattn message", errors.New("database is locked"), true},
		{"mattn table message", errors.New("database table is locked: seqbox_body"), true},
		{"code name in message", errors.New("sqlite3: SQLITE_BUSY"), true},
		{"unrelated message", errors.New("no such table: seqbox_body"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, isRetryable(tt.err))
		})
	}
}
