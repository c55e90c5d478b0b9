// Package pgpair starts a private PostgreSQL primary with a streaming
// standby for the failover tests (docs/FAILOVER.md): its own ports, data
// directories and processes, all removed at cleanup. It imports no other
// database driver, so the pglisten module can use it without them.
package pgpair

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seqbox/seqbox/internal/relaytest"
)

// PostgresBinDirDefault is where Pair looks for the server's
// binaries (initdb, postgres, pg_basebackup) unless SEQBOX_PG_BINDIR says
// otherwise: Debian's PostgreSQL 15, the machine's shared server. Without
// it, the newest /usr/lib/postgresql/<major>/bin is used.
const PostgresBinDirDefault = "/usr/lib/postgresql/15/bin"

// StandbyName is the standby's application_name, which the primary's
// synchronous_standby_names names.
const StandbyName = "standby1"

// Pair is a private PostgreSQL primary and a streaming standby made
// from it with pg_basebackup, under synchronous replication unless
// Config says otherwise: the primary's synchronous_standby_names names
// the standby, so a commit under synchronous_commit = on (the servers'
// default) returns once the standby has flushed it. Both run on ports of
// their own (the OS picks them), in a temporary directory, as an
// unprivileged user (the postgres system user when the test runs as root:
// PostgreSQL refuses root), and are stopped and removed when the test
// ends, failed or not. The standby streams through a TCP proxy of the
// test's (Replication), which can cut it. A test may SIGKILL the primary
// and promote the standby (docs/FAILOVER.md).
type Pair struct {
	t       testing.TB
	bin     string
	base    string
	cred    *syscall.Credential // nil: run as this process's user
	cfg     Config
	Primary *Server
	Standby *Server
	// Replication is the standby's way to the primary: Down cuts it (the
	// standby then keeps what it had received, and the primary's commits
	// go on only under asynchronous replication).
	Replication *relaytest.Proxy
}

// Config is how Start sets the pair up.
type Config struct {
	// Asynchronous: the primary names no synchronous standby, so commits
	// return without waiting for the standby (PostgreSQL's default).
	Asynchronous bool
	// Settings ("name=value") are given to both servers.
	Settings []string
}

// Server is one server of a Pair.
type Server struct {
	Name string
	Port int
	Dir  string // the data directory
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the server's process has been reaped
}

// DSN is the server alone, in database postgres, as a URL.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// DSN is both servers in one multi-host URL with
// target_session_attrs=read-write, as an application would be configured
// (pgx reads it; libpq too): each new connection tries the primary, then
// the standby, and keeps the first that accepts writes, so after a
// promotion the clients reach the new primary with nothing changed.
func (p *Pair) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		p.Primary.Port, p.Standby.Port)
}

// Start starts the primary, makes the standby from it, starts
// it and returns once the primary reports the standby streaming (as its
// synchronous standby, unless cfg.Asynchronous). Binaries missing
// (SEQBOX_PG_BINDIR, default PostgresBinDirDefault) fail the test under
// CI=true and skip it loudly otherwise.
func Start(t testing.TB, cfg Config) *Pair {
	t.Helper()
	bin := postgresBinDir()
	for _, b := range []string{"initdb", "postgres", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			unavailable(t, fmt.Sprintf("PostgreSQL server binaries are missing (%v); set SEQBOX_PG_BINDIR or install postgresql (.ci/run does)", err))
		}
	}
	p := &Pair{t: t, bin: bin, cfg: cfg}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(t, fmt.Sprintf("running as root, and there is no postgres user to run a private server as (%v)", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	base, err := os.MkdirTemp("", "seqbox-pgpair-")
	if err != nil {
		t.Fatalf("postgres pair: %v", err)
	}
	p.base = base
	if p.cred != nil {
		if err := os.Chown(base, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatalf("postgres pair: %v", err)
		}
	}
	t.Cleanup(p.stop)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failure bound
	defer cancel()
	p.Primary = p.server("primary")
	p.Standby = p.server("standby")
	p.run(ctx, "initdb", "-D", p.Primary.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	names, state := StandbyName, "streaming/sync"
	if cfg.Asynchronous {
		names, state = "", "streaming/async"
	}
	p.start(ctx, p.Primary, "synchronous_standby_names="+names)
	p.run(ctx, "pg_basebackup", "-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres", p.Primary.Port),
		"-D", p.Standby.Dir, "-X", "stream", "--checkpoint=fast", "--no-sync")
	p.writeFile(filepath.Join(p.Standby.Dir, "standby.signal"), "")
	// Not synchronous_standby_names: once promoted, the standby has no
	// standby of its own, and its commits would wait for one for ever.
	p.Replication = relaytest.NewProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Primary.Port)))
	host, port, err := net.SplitHostPort(p.Replication.Addr())
	if err != nil {
		t.Fatalf("postgres pair: %v", err)
	}
	// A promote request that reaches the startup process just as it begins
	// to wait before asking for WAL again is served only when that wait
	// ends (seen on 15: "received promote request", then 5 s of "waiting
	// for WAL to become available"): a short wait keeps the test short.
	p.start(ctx, p.Standby, fmt.Sprintf("primary_conninfo=host=%s port=%s user=postgres application_name=%s", host, port, StandbyName),
		"wal_retrieve_retry_interval=100ms")
	p.poll(ctx, "the standby to stream ("+state+")", func() (bool, error) {
		var got string
		err := p.query(ctx, p.Primary, &got,
			"SELECT state || '/' || sync_state FROM pg_stat_replication WHERE application_name = '"+StandbyName+"'")
		return got == state, ignoreNoRows(err)
	})
	return p
}

// postgresBinDir is SEQBOX_PG_BINDIR, PostgresBinDirDefault, or the
// newest major's bin directory under /usr/lib/postgresql.
func postgresBinDir() string {
	if dir := os.Getenv("SEQBOX_PG_BINDIR"); dir != "" {
		return dir
	}
	if _, err := os.Stat(filepath.Join(PostgresBinDirDefault, "postgres")); err == nil {
		return PostgresBinDirDefault
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestMajor := PostgresBinDirDefault, 0
	for _, d := range dirs {
		if major, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil && major > bestMajor {
			best, bestMajor = d, major
		}
	}
	return best
}

func (p *Pair) server(name string) *Server {
	return &Server{Name: name, Port: freePort(p.t), Dir: filepath.Join(p.base, name), log: filepath.Join(p.base, name+".log")}
}

// start runs the postgres server of s and waits until it answers.
func (p *Pair) start(ctx context.Context, s *Server, settings ...string) {
	p.t.Helper()
	args := []string{"-D", s.Dir}
	for _, c := range append([]string{
		"port=" + strconv.Itoa(s.Port), "listen_addresses=127.0.0.1", "unix_socket_directories=",
		// A kill ends processes, not the machine: what the OS holds
		// survives, so flushing it to disk proves nothing here and costs
		// the shared machine's disk. Commits still wait for the standby.
		"fsync=off", "shared_buffers=32MB", "max_connections=100", "max_wal_senders=4", "log_line_prefix=%m [%p] ",
	}, append(p.cfg.Settings, settings...)...) {
		args = append(args, "-c", c)
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("postgres pair: %v", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(filepath.Join(p.bin, "postgres"), args...)
	s.cmd.Dir = p.base
	s.cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Pdeathsig: should the test binary die without its cleanups (a panic,
	// a timeout), the kernel kills the postmaster, and its processes end
	// when they see it gone, instead of running on unowned.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		p.t.Fatalf("postgres pair: start %s: %v", s.Name, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	p.poll(ctx, "the "+s.Name+" to accept connections", func() (bool, error) {
		select {
		case <-s.done:
			return false, fmt.Errorf("the %s exited: %s", s.Name, p.logTail(s))
		default:
		}
		var one int
		return p.query(ctx, s, &one, "SELECT 1") == nil, nil
	})
}

// KillPrimary SIGKILLs the primary's postmaster and every process of it at
// once (backends, WAL sender and writer), as a machine that dies would end
// them, and waits until the postmaster is reaped. Each of them is first
// stopped (SIGSTOP), so that none runs on for a moment after the others:
// a backend left alive past its postmaster's death would still finish
// what it was doing.
func (p *Pair) KillPrimary() {
	p.t.Helper()
	p.kill(p.Primary, syscall.SIGKILL)
	select {
	case <-p.Primary.done:
	case <-time.After(30 * time.Second): // a failure bound
		p.t.Fatalf("postgres pair: the primary survived SIGKILL")
	}
}

// StopWALWriter stops (SIGSTOP) the primary's WAL writer, which flushes
// the log of asynchronous commits in the background (every
// wal_writer_delay): until the primary dies, such a commit then reaches
// the disk and the standby only when a later commit that waits for the
// flush carries it. A test uses it to land a crash inside that window.
// Other flushes a test must rule out itself: autovacuum, checkpoints, the
// background writer's writes (settings of Start).
func (p *Pair) StopWALWriter() {
	p.t.Helper()
	for _, k := range children(p.Primary.cmd.Process.Pid) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "walwriter") {
			if err := syscall.Kill(k, syscall.SIGSTOP); err != nil {
				p.t.Fatalf("postgres pair: stop the WAL writer: %v", err)
			}
			return
		}
	}
	p.t.Fatalf("postgres pair: the primary has no WAL writer process")
}

// Promote makes the standby a primary (pg_promote, waiting for the end of
// recovery) and returns once it accepts writes.
func (p *Pair) Promote(ctx context.Context) {
	p.t.Helper()
	var ok bool
	if err := p.query(ctx, p.Standby, &ok, "SELECT pg_promote(true, 60)"); err != nil || !ok {
		p.t.Fatalf("postgres pair: pg_promote: %v (promoted: %v)\n%s", err, ok, p.logTail(p.Standby))
	}
	p.poll(ctx, "the standby to leave recovery", func() (bool, error) {
		var recovering bool
		err := p.query(ctx, p.Standby, &recovering, "SELECT pg_is_in_recovery()")
		return err == nil && !recovering, nil
	})
}

// kill signals s's postmaster and, for SIGKILL, every child of it: each
// child runs in a session of its own (PostgreSQL calls setsid), so a
// signal to the postmaster's process group does not reach them. The
// postmaster is stopped first, so that it forks none meanwhile.
func (p *Pair) kill(s *Server, sig syscall.Signal) {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pid := s.cmd.Process.Pid
	select {
	case <-s.done:
		return // reaped: the pid may be another process's now
	default:
	}
	if sig != syscall.SIGKILL {
		_ = syscall.Kill(pid, sig)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGSTOP)
	}
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// stop ends both servers (a fast shutdown, then SIGKILL of what remains)
// and removes their directory; it logs the servers' last output when the
// test failed.
func (p *Pair) stop() {
	for _, s := range []*Server{p.Primary, p.Standby} {
		if s == nil || s.cmd == nil {
			continue
		}
		select {
		case <-s.done:
		default:
			for _, k := range children(s.cmd.Process.Pid) {
				_ = syscall.Kill(k, syscall.SIGCONT) // a WAL writer StopWALWriter stopped
			}
		}
		p.kill(s, syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
		}
		p.kill(s, syscall.SIGKILL) // a shutdown that hung
		<-s.done
		if p.t.Failed() {
			p.t.Logf("postgres pair: last output of the %s:\n%s", s.Name, p.logTail(s))
		}
	}
	_ = os.RemoveAll(p.base)
}

func (p *Pair) logTail(s *Server) string {
	b, _ := os.ReadFile(s.log)
	const n = 4000
	if len(b) > n {
		b = append([]byte("…"), b[len(b)-n:]...)
	}
	return string(b)
}

// run runs one of the binaries as the servers' user and fails the test
// with its output if it fails.
func (p *Pair) run(ctx context.Context, name string, args ...string) {
	p.t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.base
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("postgres pair: %s: %v\n%s", name, err, out)
	}
}

func (p *Pair) writeFile(path, content string) {
	p.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		p.t.Fatalf("postgres pair: %v", err)
	}
	if p.cred != nil {
		if err := os.Chown(path, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			p.t.Fatalf("postgres pair: %v", err)
		}
	}
}

// query runs one statement on a connection of its own to s and scans its
// one row into dest.
func (p *Pair) query(ctx context.Context, s *Server, dest any, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest)
}

// poll calls cond until it holds, fails or ctx ends (a failure bound, not
// a timing assumption).
func (p *Pair) poll(ctx context.Context, what string, cond func() (bool, error)) {
	p.t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			p.t.Fatalf("postgres pair: waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("postgres pair: timed out waiting for %s\nprimary:\n%s\nstandby:\n%s", what, p.logTail(p.Primary), p.logTail(p.Standby))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ignoreNoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// freePort is a TCP port on 127.0.0.1 the OS has just handed out and taken
// back: free, unless something else takes it in the moment before the
// server binds it.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("postgres pair: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// unavailable fails under CI=true and skips loudly otherwise, as
// Unreachable does for the shared servers.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING: %s ***\n\n", strings.ToUpper(msg[:1])+msg[1:])
	t.Skip(msg)
}
