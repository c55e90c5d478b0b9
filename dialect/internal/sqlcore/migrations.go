package sqlcore

import (
	"fmt"
	"io/fs"
	"sort"
)

// LoadMigrations reads migration/000_bootstrap.sql and the numbered
// migration/NNN_*.sql files of a dialect, in order.
func LoadMigrations(fsys fs.FS) (bootstrap string, migrations []string, err error) {
	names, err := fs.Glob(fsys, "migration/*.sql")
	if err != nil {
		return "", nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "", nil, fmt.Errorf("seqbox: read %s: %w", name, err)
		}
		if name == "migration/000_bootstrap.sql" {
			bootstrap = string(b)
			continue
		}
		migrations = append(migrations, string(b))
	}
	if bootstrap == "" || len(migrations) == 0 {
		return "", nil, fmt.Errorf("seqbox: embedded migrations missing")
	}
	return bootstrap, migrations, nil
}

// RenderFS renders a dialect's embedded migrations for prefix, without a
// database (golden files, review).
func RenderFS(fsys fs.FS, prefix string) ([]string, error) {
	boot, migs, err := LoadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	return Render(boot, migs, prefix)
}
