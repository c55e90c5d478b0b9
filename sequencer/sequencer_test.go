package sequencer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

type namedDialect struct {
	dialect.Dialect // nil: only Name and Features are called
	name            dialect.Name
	features        dialect.Feature
}

func (d namedDialect) Name() dialect.Name        { return d.name }
func (d namedDialect) Features() dialect.Feature { return d.features }

func TestWorkersFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, 4, WorkersFor(namedDialect{name: dialect.Postgres, features: dialect.RowLocks}))
	require.Equal(t, 2, WorkersFor(namedDialect{name: dialect.MySQL, features: dialect.RowLocks}))
	require.Equal(t, 1, WorkersFor(namedDialect{name: dialect.SQLite, features: dialect.SingleWriter}))
}
