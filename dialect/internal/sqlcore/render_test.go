package sqlcore_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/sqlcore"
)

func TestRender(t *testing.T) {
	t.Parallel()
	got, err := sqlcore.Render(
		"CREATE {schema_version}\n",
		[]string{
			"A {body}\n-- seqbox:split\n  \n-- seqbox:split\nB {incoming}",
			"-- seqbox:split\nC {dead_letters}\n-- seqbox:split\n",
		},
		"x_",
	)
	require.NoError(t, err)
	// Bootstrap first, then migrations in order; blank pieces are dropped
	// and each statement is trimmed.
	require.Equal(t, []string{"CREATE x_schema_version", "A x_body", "B x_incoming", "C x_dead_letters"}, got)
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	_, err := sqlcore.Render("CREATE {schema_version}", nil, "Bad")
	require.ErrorIs(t, err, dialect.ErrInvalidPrefix)

	_, err = sqlcore.Render("CREATE {schema_version}", []string{"CREATE {no_such_table}"}, "x_")
	require.ErrorContains(t, err, "unknown SQL placeholder {no_such_table}", "a misspelled table must not render as empty text")
}

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"migration/002_second.sql":    {Data: []byte("two")},
		"migration/000_bootstrap.sql": {Data: []byte("boot")},
		"migration/001_init.sql":      {Data: []byte("one")},
		"migration/README.md":         {Data: []byte("not sql")},
	}
	boot, migs, err := sqlcore.LoadMigrations(fsys)
	require.NoError(t, err)
	require.Equal(t, "boot", boot)
	require.Equal(t, []string{"one", "two"}, migs, "numbered order, bootstrap apart")

	_, _, err = sqlcore.LoadMigrations(fstest.MapFS{"migration/001_init.sql": {Data: []byte("one")}})
	require.Error(t, err, "no bootstrap")
	_, _, err = sqlcore.LoadMigrations(fstest.MapFS{"migration/000_bootstrap.sql": {Data: []byte("boot")}})
	require.Error(t, err, "no migration")
}

func TestExpanderFragments(t *testing.T) {
	t.Parallel()
	tables, err := dialect.NewTables("p_")
	require.NoError(t, err)
	x := sqlcore.NewExpander(tables, map[string]string{"now": "now()", "fresh": "t > {now}"})
	got, err := x.Expand("SELECT 1 FROM {body} WHERE {fresh} AND id = ?")
	require.NoError(t, err)
	require.Equal(t, "SELECT 1 FROM p_body WHERE t > now() AND id = ?", got, "fragments expand in turn; ? is left to bun")
	_, err = x.Expand("SELECT {nope}")
	require.Error(t, err)
	_, err = x.Expand("SELECT {nope2}")
	require.Error(t, err, "digits in a name must not let it through unexpanded")
}
