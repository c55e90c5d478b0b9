package bench

import (
	"context"
	"database/sql"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"
)

// meter is one run's live message counter and the resources used during
// its measurement window (begin/end bracket the window, not the set-up).
type meter struct {
	count  atomic.Int64
	server func(ctx context.Context) serverCounters

	cpuStart    cpuTimes
	serverStart serverCounters
	cpu         cpuShare
	cpuOK       bool
	elapsed     time.Duration
	logBytes    int64 // database log written in the window
	logSyncs    int64 // database fsyncs in the window
	logBytesOK  bool
	logSyncsOK  bool
}

func (m *meter) begin(ctx context.Context) {
	m.cpuStart = readCPU()
	if m.server != nil {
		m.serverStart = m.server(ctx)
	}
}

func (m *meter) end(ctx context.Context) {
	now := readCPU()
	m.cpu, m.cpuOK = now.since(m.cpuStart)
	m.elapsed = now.at.Sub(m.cpuStart.at)
	if m.server == nil {
		return
	}
	s := m.server(ctx)
	if s.hasBytes && m.serverStart.hasBytes {
		m.logBytes, m.logBytesOK = s.logBytes-m.serverStart.logBytes, true
	}
	if s.hasSyncs && m.serverStart.hasSyncs {
		m.logSyncs, m.logSyncsOK = s.logSyncs-m.serverStart.logSyncs, true
	}
}

// usageStats collects a figure's resource use over its runs into Extra.
type usageStats struct {
	client, machine, logBytesPerMsg, logSyncsPerSec []float64
}

func (u *usageStats) add(m *meter) {
	if m.cpuOK {
		u.client, u.machine = append(u.client, m.cpu.ClientPct), append(u.machine, m.cpu.MachinePct)
	}
	if n := m.count.Load(); m.logBytesOK && n > 0 {
		u.logBytesPerMsg = append(u.logBytesPerMsg, float64(m.logBytes)/float64(n))
	}
	if m.logSyncsOK && m.elapsed > 0 {
		u.logSyncsPerSec = append(u.logSyncsPerSec, float64(m.logSyncs)/m.elapsed.Seconds())
	}
}

func (u *usageStats) put(extra map[string]any) {
	for key, v := range map[string][]float64{
		"cpu_client_pct": u.client, "cpu_machine_pct": u.machine,
		"db_log_bytes_per_msg": u.logBytesPerMsg, "db_fsyncs_per_sec": u.logSyncsPerSec,
	} {
		if len(v) > 0 {
			extra[key] = newStat(v)
		}
	}
}

// serverCounters are the database's cumulative log counters. They are
// server-wide: another client's writes in the window count too.
type serverCounters struct {
	logBytes, logSyncs int64
	hasBytes, hasSyncs bool
}

// readServerCounters reads what each database exposes without delay:
// PostgreSQL the WAL position (its sync counters reach the statistics
// views only every second or so, too coarse for a window); MariaDB/MySQL
// the redo bytes and every InnoDB fsync (one per durable commit, shared by
// group commit; MariaDB 10.11 has no separate log-fsync counter). SQLite
// has neither.
func readServerCounters(ctx context.Context, db *bun.DB) serverCounters {
	var c serverCounters
	switch db.Dialect().Name() {
	case bundialect.PG:
		var lsn sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text").Scan(&lsn); err == nil {
			if v, err := strconv.ParseFloat(lsn.String, 64); err == nil {
				c.logBytes, c.hasBytes = int64(v), true
			}
		}
	case bundialect.MySQL:
		rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_written', 'Innodb_data_fsyncs')")
		if err != nil {
			return c
		}
		defer rows.Close()
		for rows.Next() {
			var name, value string
			if rows.Scan(&name, &value) != nil {
				return serverCounters{}
			}
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				continue
			}
			switch name {
			case "Innodb_os_log_written":
				c.logBytes, c.hasBytes = v, true
			case "Innodb_data_fsyncs":
				c.logSyncs, c.hasSyncs = v, true
			}
		}
		if rows.Err() != nil {
			return serverCounters{}
		}
	}
	return c
}
