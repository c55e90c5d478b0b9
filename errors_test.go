package seqbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryErrorReachableFromRoot: each exported sentinel (Err…) and typed
// error (…Error) of a package an application uses is also named in the
// root package, so one import reaches them all.
func TestEveryErrorReachableFromRoot(t *testing.T) {
	t.Parallel()
	exported := func(dir string) map[string]bool {
		names := map[string]bool{}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		fset := token.NewFileSet()
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			require.NoError(t, err)
			{
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok {
						continue
					}
					for _, s := range g.Specs {
						switch s := s.(type) {
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
									names[n.Name] = true
								}
							}
						case *ast.TypeSpec:
							if s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
								names[s.Name.Name] = true
							}
						}
					}
				}
			}
		}
		return names
	}
	root := exported(".")
	for _, dir := range []string{"outbox", "processor", "deadletter", "dialect/postgres", "dialect/mysql", "dialect/sqlite"} {
		for name := range exported(dir) {
			require.True(t, root[name], "%s.%s is not reachable from package seqbox", dir, name)
		}
	}
}
