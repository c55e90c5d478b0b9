package outbox_test

import (
	"errors"
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
)

// The documented rules (README, "Guarantees" 6) as regular expressions: an oracle
// written independently of the hand-rolled validators. Seeds live in
// testdata/fuzz/<FuzzName>/.
var (
	queueNameRE   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`)
	payloadTypeRE = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)
)

func FuzzValidateQueueName(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string) {
		err := outbox.ValidateQueueName(name)
		if queueNameRE.MatchString(name) {
			require.NoError(t, err, "%q matches the documented pattern", name)
			return
		}
		require.Error(t, err, "%q does not match the documented pattern", name)
		require.ErrorIs(t, err, outbox.ErrInvalidQueueName)
		var qerr *outbox.QueueNameError
		require.True(t, errors.As(err, &qerr), "want *QueueNameError, got %T", err)
		require.Equal(t, name, qerr.Name)
	})
}

func FuzzValidatePayloadType(f *testing.F) {
	f.Fuzz(func(t *testing.T, payloadType string) {
		err := outbox.ValidatePayloadType(payloadType)
		if payloadTypeRE.MatchString(payloadType) {
			require.NoError(t, err, "%q is 1..255 printable ASCII bytes", payloadType)
			return
		}
		require.ErrorIs(t, err, outbox.ErrInvalidPayloadType, "%q", payloadType)
	})
}

func FuzzPartitionForKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string, raw uint16) {
		n := int(raw%outbox.MaxPartitions) + 1 // every valid count, 1..1024
		require.Zero(t, outbox.PartitionForKey(key, 1-n), "counts below 1 map to 0, never panic")
		got := outbox.PartitionForKey(key, n)
		require.GreaterOrEqual(t, got, 0)
		require.Less(t, got, n)
		require.Equal(t, got, outbox.PartitionForKey(key, n), "not deterministic")
		require.Equal(t, int(fnv1a32(key)%uint32(n)), got, "not FNV-1a modulo n")
	})
}

// FuzzValidateDedupKey: empty (no key) or 1..255 bytes of valid UTF-8.
func FuzzValidateDedupKey(f *testing.F) {
	f.Add("")
	f.Add("order-42")
	f.Add("\xff")
	f.Add(string(make([]byte, 256)))
	f.Add("🙂🙂🙂")
	f.Fuzz(func(t *testing.T, key string) {
		err := outbox.ValidateDedupKey(key)
		if len(key) <= outbox.MaxDedupKeyLen && utf8.ValidString(key) {
			require.NoError(t, err, "%q", key)
			return
		}
		require.ErrorIs(t, err, outbox.ErrInvalidDedupKey, "%q", key)
	})
}

// FuzzPurgeFilter: a one-header filter is valid iff its name is non-empty
// and name and value are valid UTF-8; refusals match ErrInvalidPurgeFilter.
func FuzzPurgeFilter(f *testing.F) {
	f.Add("tenant", "42")
	f.Add("", "x")
	f.Add("k", "\xff")
	f.Add("\xc3(", "v")
	f.Fuzz(func(t *testing.T, name, value string) {
		err := outbox.PurgeFilter{Headers: map[string]string{name: value}}.Validate()
		if name != "" && utf8.ValidString(name) && utf8.ValidString(value) {
			require.NoError(t, err, "%q=%q", name, value)
			return
		}
		require.ErrorIs(t, err, outbox.ErrInvalidPurgeFilter, "%q=%q", name, value)
	})
}
