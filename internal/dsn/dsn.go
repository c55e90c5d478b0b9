// Package dsn holds helpers for database connection strings shared by the
// command line and the benchmark harness.
package dsn

import (
	"net/url"
	"strings"
)

// Redact hides the password of a DSN so it can be printed: URL forms
// (postgres://, mysql://) and go-sql-driver's native user:pass@tcp(…) form.
func Redact(dsn string) string {
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			return u.Redacted()
		}
		return "(unparsable URL)"
	}
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if user, _, ok := strings.Cut(dsn[:at], ":"); ok {
			return user + ":xxxxx" + dsn[at:]
		}
	}
	return dsn
}
