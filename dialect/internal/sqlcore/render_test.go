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
		"CREATE {{.SchemaVersion}}\n",
		[]string{
			"A {{.Body}}\n-- seqbox:split\n  \n-- seqbox:split\nB {{.Incoming}}",
			"-- seqbox:split\nC {{.DeadLetters}}\n-- seqbox:split\n",
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
	_, err := sqlcore.Render("CREATE {{.SchemaVersion}}", nil, "Bad")
	require.ErrorIs(t, err, dialect.ErrInvalidPrefix)

	_, err = sqlcore.Render("CREATE {{.SchemaVersion", nil, "x_")
	require.ErrorContains(t, err, "parse schema template")

	_, err = sqlcore.Render("CREATE {{.SchemaVersion}}", []string{"CREATE {{.NoSuchTable}}"}, "x_")
	require.ErrorContains(t, err, "render schema", "a misspelled table must not render as empty text")
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
