package mysql

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg  string
		want bool
	}{
		{"Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction", true},
		{"Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction", true},
		{"Error 3101 (40001): Plugin instructed the server to rollback the current transaction", true},
		{"Error 1062 (23000): Duplicate entry '1' for key 'PRIMARY'", false},
		{"Error 12130 (HY000): not a deadlock", false},
		{"Error 1146 (42S02): Table 'x' doesn't exist", false},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, isRetryable(errors.New(tt.msg)))
			require.Equal(t, tt.want, isRetryable(fmt.Errorf("exec: %w", errors.New(tt.msg))), "wrapped")
		})
	}
}

func TestIsDisconnect(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{errors.New("Error 1927 (70100): Connection was killed"), true},
		{errors.New("Error 2013: Lost connection to MySQL server during query"), true},
		{errors.New("invalid connection"), true},
		{driver.ErrBadConn, true},
		{errors.New("Error 1062 (23000): Duplicate entry"), false},
	} {
		require.Equal(t, tt.want, isDisconnect(tt.err), "%v", tt.err)
	}
}
