package seqbox_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// driverPackages are the database drivers (and their internals) that no
// library package may link: an application picks its own driver, and a
// driver's init registers a database/sql name the application may mean
// for another (docs/ARCHITECTURE.md, "Decisions worth knowing").
var driverPackages = []string{
	"github.com/uptrace/bun/driver/pgdriver",
	"github.com/jackc/pgx",
	"github.com/lib/pq",
	"github.com/go-sql-driver/mysql",
	"github.com/uptrace/bun/driver/sqliteshim",
	"modernc.org/sqlite",
	"github.com/mattn/go-sqlite3",
}

// driverUsers are the packages of this module that may import a driver:
// the CLI and the helpers of tests. Every other package is one an
// application may link.
var driverUsers = []string{
	"github.com/seqbox/seqbox/cmd/",
	"github.com/seqbox/seqbox/examples/", // programs that open a database
	"github.com/seqbox/seqbox/internal/dbtest",
	"github.com/seqbox/seqbox/internal/pgpair", // the failover tests' private servers
	"github.com/seqbox/seqbox/internal/conformance",
	"github.com/seqbox/seqbox/internal/relaytest",
}

// TestLibraryLinksNoDriver fails when a package an application may import
// links a database driver, directly or through any dependency.
func TestLibraryLinksNoDriver(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the go command is not on PATH: %v", err)
	}
	// .Deps is what go list -deps prints for the package: every package
	// it links, transitively; test files are not part of it.
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), " ")
		if mayUseDriver(pkg) {
			continue
		}
		checked++
		var linked []string
		for dep := range strings.FieldsSeq(deps) {
			for _, drv := range driverPackages {
				if dep == drv || strings.HasPrefix(dep, drv+"/") {
					linked = append(linked, dep)
				}
			}
		}
		if len(linked) > 0 {
			t.Errorf("%s links database driver packages: %s", pkg, strings.Join(linked, ", "))
		}
	}
	if checked < 10 || !strings.Contains(string(out), "github.com/seqbox/seqbox ") {
		t.Fatalf("checked %d packages; go list printed:\n%s", checked, out)
	}
}

func mayUseDriver(pkg string) bool {
	for _, p := range driverUsers {
		if pkg == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) {
			return true
		}
	}
	return false
}
