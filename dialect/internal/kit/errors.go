package kit

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// IsNetworkError recognises a connection lost below the database protocol,
// whatever the driver: a bad connection, a reset, a closed socket.
func IsNetworkError(err error) bool {
	var netErr net.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.As(err, &netErr):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "bad connection") || strings.Contains(msg, "use of closed network connection")
}
