package mysql

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version string
		mariaDB bool
		ok      bool
	}{
		{"10.11.14-MariaDB-0+deb12u1", true, true},
		{"10.6.0-MariaDB", true, true},
		{"11.4.2-MariaDB", true, true},
		{"10.5.2-MariaDB", true, false},
		{"8.0.36", false, true},
		{"8.0.4", false, true},
		{"8.0.3", false, false},
		{"8.4.0-commercial", false, true},
		{"9.1.0", false, true},
		{"8.0.0", false, false},
		{"5.7.44", false, false},
		{"5.7.44-log", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			mariaDB, err := checkVersion(tt.version)
			require.Equal(t, tt.mariaDB, mariaDB)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrServerTooOld)
			require.Contains(t, err.Error(), tt.version)
		})
	}
}

// TestCheckVersionRefusesTiDB: TiDB reports a MySQL version that would pass,
// and is refused for what it lacks (the first two strings are what TiDB
// v8.5.3 and a v9 build return for VERSION(); the third is the 5.7 form of
// older releases).
func TestCheckVersionRefusesTiDB(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"8.0.11-TiDB-v8.5.3", "8.0.11-TiDB-v9.0.0-beta.1.pre-640-g24903d6b24-dirty", "5.7.25-TiDB-v6.5.0"} {
		_, err := checkVersion(v)
		require.ErrorIs(t, err, ErrUnsupportedServer, "%q", v)
		require.NotErrorIs(t, err, ErrServerTooOld, "%q", v)
		require.Contains(t, err.Error(), v)
		require.Contains(t, err.Error(), "SKIP LOCKED")
	}
}

func TestCheckVersionGarbage(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "garbage", "v8.0.36", "8.0", "MariaDB"} {
		_, err := checkVersion(v)
		require.Error(t, err, "%q", v)
		require.ErrorIs(t, err, ErrServerTooOld, "%q", v)
	}
}
