package sqlite

import (
	"errors"
	"strings"
)

// isRetryable recognises SQLITE_BUSY and SQLITE_LOCKED without importing a
// driver: modernc's error has Code(), mattn's message names the code.
func isRetryable(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") ||
		strings.Contains(msg, "database table is locked")
}

// isDisconnect: an embedded database has no connection to lose.
func isDisconnect(error) bool { return false }
