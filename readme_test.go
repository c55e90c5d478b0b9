package seqbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeGettingStarted keeps README's "Getting started" programs the
// ones in examples/getting-started, which go vet compiles and CI builds:
// the README shows nothing that does not build.
func TestReadmeGettingStarted(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		src, err := os.ReadFile("examples/getting-started/" + db + "/main.go")
		require.NoError(t, err)
		block := "```go\n" + strings.TrimRight(string(src), "\n") + "\n```"
		require.Contains(t, string(readme), block, "README's Getting started differs from examples/getting-started/%s/main.go", db)
	}
}
