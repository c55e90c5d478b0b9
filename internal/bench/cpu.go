package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is a reading of this process's CPU time and, where /proc/stat
// exists, the whole machine's busy and total jiffies.
type cpuTimes struct {
	at            time.Time
	process       time.Duration
	busy, total   uint64
	machineOK, ok bool
}

// cpuShare is where the CPU went during a measurement window, in percent
// of all cores: this process (client, seqbox's background tasks and an
// embedded SQLite) and the whole machine (database server and anything
// else running). Machine minus client approximates the server's share,
// and a machine figure near 100 says the box, not the database, was the limit.
type cpuShare struct {
	ClientPct, MachinePct float64
}

func readCPU() cpuTimes {
	t := cpuTimes{at: time.Now()}
	t.process, t.ok = processCPU()
	t.busy, t.total, t.machineOK = machineJiffies()
	return t
}

// since is the share used between an earlier reading and t.
func (t cpuTimes) since(start cpuTimes) (cpuShare, bool) {
	wall := t.at.Sub(start.at)
	if !t.ok || !start.ok || wall <= 0 {
		return cpuShare{}, false
	}
	s := cpuShare{ClientPct: 100 * float64(t.process-start.process) / float64(wall) / float64(runtime.NumCPU())}
	if t.machineOK && start.machineOK && t.total > start.total {
		s.MachinePct = 100 * float64(t.busy-start.busy) / float64(t.total-start.total)
	}
	return s, true
}

// machineJiffies reads the aggregate "cpu" line of /proc/stat: busy is
// everything but idle and iowait.
func machineJiffies() (busy, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, true
}
