package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"
)

// machineInfo describes this host. Client and database usually share it,
// so cores and memory bound both.
func machineInfo() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if kb, ok := procField("/proc/meminfo", "MemTotal"); ok {
		m.MemTotalBytes = kb * 1024
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// peakRSS is the process's high-water resident set, from VmHWM; 0 when
// /proc is not there.
func peakRSS() int64 {
	kb, _ := procField("/proc/self/status", "VmHWM")
	return kb * 1024
}

// procField reads "Key:   123 kB" from a /proc file, in kB.
func procField(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// databaseInfo reads the server version and the settings that change the
// answer (durability and cache size). A setting the server refuses is
// recorded as its error rather than failing the benchmark.
func databaseInfo(ctx context.Context, db *bun.DB) (Database, error) {
	info := Database{Driver: fmt.Sprintf("%T", db.Driver()), Settings: map[string]string{}}
	var versionQuery string
	var settings [][2]string // name, query
	switch db.Dialect().Name() {
	case bundialect.PG:
		info.Name, versionQuery = "postgres", "SELECT version()"
		for _, s := range []string{"fsync", "synchronous_commit", "shared_buffers", "wal_level", "full_page_writes", "autovacuum"} {
			settings = append(settings, [2]string{s, "SHOW " + s})
		}
	case bundialect.MySQL:
		info.Name, versionQuery = "mysql", "SELECT version()"
		for _, s := range []string{"innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "innodb_buffer_pool_size", "version_comment"} {
			settings = append(settings, [2]string{s, "SELECT @@" + s})
		}
	case bundialect.SQLite:
		info.Name, versionQuery = "sqlite", "SELECT sqlite_version()"
		// Pragmas are per connection; every pooled one is opened with the
		// same DSN, so any connection answers for all.
		for _, s := range []string{"journal_mode", "synchronous", "busy_timeout"} {
			settings = append(settings, [2]string{s, "PRAGMA " + s})
		}
	default:
		return info, fmt.Errorf("bench: unsupported bun dialect %s", db.Dialect().Name())
	}
	var version string
	if err := db.QueryRowContext(ctx, versionQuery).Scan(&version); err != nil {
		return info, fmt.Errorf("bench: read database version: %w", err)
	}
	info.Version = version
	if info.Name == "mysql" && strings.Contains(strings.ToLower(version), "mariadb") {
		info.Name = "mariadb"
	}
	for _, s := range settings {
		var v sql.NullString
		if err := db.QueryRowContext(ctx, s[1]).Scan(&v); err != nil {
			info.Settings[s[0]] = "error: " + err.Error()
			continue
		}
		info.Settings[s[0]] = v.String
		if info.Name == "sqlite" && s[0] == "synchronous" {
			if i, err := strconv.Atoi(v.String); err == nil && i >= 0 && i <= 3 {
				info.Settings[s[0]] += " (" + [...]string{"OFF", "NORMAL", "FULL", "EXTRA"}[i] + ")"
			}
		}
	}
	return info, nil
}
