package mysql

import (
	"regexp"

	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// retryableRE matches go-sql-driver's "Error 1213 (40001): …" without
// importing the driver: 1213 deadlock, 1205 lock wait timeout, 40001 serialization.
var retryableRE = regexp.MustCompile(`Error (1213|1205)\b|\(40001\)`)

// isRetryable reports a conflict that may be retried at once.
func isRetryable(err error) bool { return retryableRE.MatchString(err.Error()) }

// disconnectRE matches a connection the server dropped or killed: 1927
// "Connection was killed" (MariaDB), 2006 "server has gone away", 2013
// "lost connection", 1053 server shutdown, 4031 idle disconnect (MySQL).
var disconnectRE = regexp.MustCompile(`Error (1927|2006|2013|1053|4031)\b|invalid connection`)

// isDisconnect reports a connection that dropped or was killed.
func isDisconnect(err error) bool {
	return disconnectRE.MatchString(err.Error()) || kit.IsNetworkError(err)
}

// accessDeniedRE matches go-sql-driver's "Error 1227 (42000): Access
// denied; you need (at least one of) the PROCESS privilege(s)", the move
// floors' listing refused (floors.go).
var accessDeniedRE = regexp.MustCompile(`Error 1227\b`)

// isAccessDenied reports a statement refused for a missing privilege.
func isAccessDenied(err error) bool { return accessDeniedRE.MatchString(err.Error()) }
