package dsn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:secret@h/db":                       "postgres://u:xxxxx@h/db",
		"postgres://postgres:secret@127.0.0.1:5432/test": "postgres://postgres:xxxxx@127.0.0.1:5432/test",
		"mysql://root@h/db":                              "mysql://root@h/db",
		"u:secret@tcp(h:3306)/db":                        "u:xxxxx@tcp(h:3306)/db",
		"sqlite:x.db":                                    "sqlite:x.db",
		"postgres://u:p@[::1:5432/db":                    "(unparsable URL)",
	} {
		require.Equal(t, want, Redact(in), in)
	}
}
