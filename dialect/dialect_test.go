package dialect_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect"
)

// prefixRE is the documented prefix rule, an oracle independent of the
// hand-rolled ValidatePrefix. Fuzz seeds live in testdata/fuzz/FuzzValidatePrefix.
var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,31}$`)

func FuzzValidatePrefix(f *testing.F) {
	f.Fuzz(func(t *testing.T, prefix string) {
		err := dialect.ValidatePrefix(prefix)
		if prefixRE.MatchString(prefix) {
			require.NoError(t, err, "%q matches the documented pattern", prefix)
			return
		}
		require.ErrorIs(t, err, dialect.ErrInvalidPrefix, "%q", prefix)
	})
}

func TestValidatePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		prefix string
		ok     bool
	}{
		{"default", dialect.DefaultPrefix, true},
		{"underscore only", "_", true},
		{"one letter", "a", true},
		{"digits after first", "q1_2", true},
		{"leading underscore", "_app", true},
		{"max length", strings.Repeat("p", 32), true},
		{"empty", "", false},
		{"too long", strings.Repeat("p", 33), false},
		{"leading digit", "1app_", false},
		{"upper case", "App_", false},
		{"dash", "my-app_", false},
		{"dot", "app.x_", false},
		{"space", "app x", false},
		{"quote", "app\"_", false},
		{"unicode", "sé_", false},
		{"NUL", "app\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := dialect.ValidatePrefix(tt.prefix)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, dialect.ErrInvalidPrefix)
		})
	}
}

func TestNewTables(t *testing.T) {
	t.Parallel()
	tables, err := dialect.NewTables("app_")
	require.NoError(t, err)
	require.Equal(t, dialect.Tables{
		Prefix:        "app_",
		Partitions:    "app_partitions",
		Body:          "app_body",
		Incoming:      "app_incoming",
		Outgoing:      "app_outgoing",
		Processor:     "app_processor",
		VacuumCounter: "app_vacuum_counter",
		DeadLetters:   "app_dead_letters",
		DedupKeys:     "app_dedup_keys",
		SchemaVersion: "app_schema_version",
		Generations:   "app_generations",
	}, tables)
	// Creation order: the version table first (bootstrap), and every table once.
	require.Equal(t, []string{
		"app_schema_version", "app_partitions", "app_body", "app_incoming",
		"app_outgoing", "app_processor", "app_vacuum_counter", "app_dead_letters", "app_dedup_keys",
	}, tables.All())

	_, err = dialect.NewTables("App")
	require.ErrorIs(t, err, dialect.ErrInvalidPrefix)
}

func TestMessageIDString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   dialect.MessageID
		want string
	}{
		{dialect.MessageID{}, "00000000-0000-0000-0000-000000000000"},
		{
			dialect.MessageID{0x01, 0x8f, 0x3c, 0x4d, 0x5e, 0x6f, 0x7a, 0x8b, 0x9c, 0xad, 0xbe, 0xcf, 0xd0, 0xe1, 0xf2, 0x03},
			"018f3c4d-5e6f-7a8b-9cad-becfd0e1f203",
		},
		{
			dialect.MessageID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			"ffffffff-ffff-ffff-ffff-ffffffffffff",
		},
	}
	canonical := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for _, tt := range tests {
		got := tt.id.String()
		require.Equal(t, tt.want, got)
		require.Regexp(t, canonical, got)
	}
}

func TestPartitionCountError(t *testing.T) {
	t.Parallel()
	var err error = &dialect.PartitionCountError{Queue: "orders", Registered: 8, Requested: 16}
	wrapped := fmt.Errorf("register: %w", err)

	require.ErrorIs(t, wrapped, dialect.ErrPartitionCountMismatch)
	var pce *dialect.PartitionCountError
	require.ErrorAs(t, wrapped, &pce)
	require.Equal(t, dialect.PartitionCountError{Queue: "orders", Registered: 8, Requested: 16}, *pce)
	require.Contains(t, err.Error(), `"orders"`)
	require.Contains(t, err.Error(), "8 partitions, not 16")
	// It must not match unrelated sentinels.
	require.False(t, errors.Is(err, dialect.ErrInvalidPrefix))
}

func TestFeatureHas(t *testing.T) {
	t.Parallel()
	both := dialect.MultiProcess | dialect.SingleWriter
	require.True(t, both.Has(dialect.MultiProcess))
	require.True(t, both.Has(dialect.SingleWriter))
	require.True(t, both.Has(both))
	require.True(t, dialect.MultiProcess.Has(0), "the empty set is always present")
	require.False(t, dialect.MultiProcess.Has(dialect.SingleWriter))
	require.False(t, dialect.MultiProcess.Has(both), "every wanted bit must be set")
	require.False(t, dialect.Feature(0).Has(dialect.MultiProcess))
}

func TestNameString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres", dialect.Postgres.String())
	require.Equal(t, "mysql", dialect.MySQL.String())
	require.Equal(t, "sqlite", dialect.SQLite.String())
	require.Equal(t, "invalid", dialect.Invalid.String())
	require.Equal(t, "invalid", dialect.Name(99).String())
}

// TestWrapPrefixOnce: an error wrapped with what seqbox was doing reads
// "seqbox: " once, and still matches its cause.
func TestWrapPrefixOnce(t *testing.T) {
	t.Parallel()
	inner := fmt.Errorf("%w: deadlock found", dialect.ErrRetryable)
	err := dialect.Wrap(inner, `enqueue to "q"`)
	require.Equal(t, `seqbox: enqueue to "q": retryable database conflict: deadlock found`, err.Error())
	require.ErrorIs(t, err, dialect.ErrRetryable)
	require.NoError(t, dialect.Wrap(nil, "x"))
}
