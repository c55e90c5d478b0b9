package dbtest

import (
	"context"
	"testing"

	"github.com/uptrace/bun"
)

// TestPrefixDropsItsTables: a test's tables and views (on PostgreSQL a
// partitioned table too) are gone once it ends, and another prefix's stay.
func TestPrefixDropsItsTables(t *testing.T) {
	for _, o := range []Opener{{"postgres", Postgres}, {"mysql", MySQL}} {
		t.Run(o.Name, func(t *testing.T) {
			ctx := context.Background()
			db := o.Open(t)
			exec := func(t *testing.T, query string, args ...any) {
				t.Helper()
				if _, err := db.NewRaw(query, args...).Exec(ctx); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
			}
			other := Prefix(t) // dropped when this test ends, after the checks
			exec(t, "CREATE TABLE ? (id INTEGER PRIMARY KEY)", bun.Ident(other+"kept"))

			var prefix string
			t.Run("inner", func(t *testing.T) {
				prefix = Prefix(t)
				exec(t, "CREATE TABLE ? (id INTEGER PRIMARY KEY)", bun.Ident(prefix+"a"))
				exec(t, "CREATE VIEW ? AS SELECT id FROM ?", bun.Ident(prefix+"v"), bun.Ident(prefix+"a"))
				if o.Name == "postgres" {
					exec(t, "CREATE TABLE ? (id INTEGER NOT NULL) PARTITION BY LIST (id)", bun.Ident(prefix+"p"))
					exec(t, "CREATE TABLE ? PARTITION OF ? FOR VALUES IN (0)", bun.Ident(prefix+"p_0"), bun.Ident(prefix+"p"))
				}
			})
			if left := tablesOf(t, db, prefix); len(left) > 0 {
				t.Errorf("left behind after the test ended: %v", left)
			}
			if kept := tablesOf(t, db, other); len(kept) != 1 {
				t.Errorf("another prefix's tables: %v, want its one table", kept)
			}
		})
	}
}

func tablesOf(t *testing.T, db *bun.DB, prefix string) []string {
	t.Helper()
	var names []string
	query := "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND LEFT(table_name, CHAR_LENGTH(?0)) = ?0"
	if db.Dialect().Name().String() == "pg" {
		query = "SELECT relname FROM pg_class WHERE relnamespace = CAST(current_schema() AS regnamespace) AND relkind IN ('r', 'p', 'v') AND starts_with(relname, ?0)"
	}
	if err := db.NewRaw(query, prefix).Scan(context.Background(), &names); err != nil {
		t.Fatalf("list tables: %v", err)
	}
	return names
}
