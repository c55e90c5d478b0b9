package relaytest

// The clustered-broker tests (docs/CLUSTERS.md): a private cluster of
// broker processes that a test starts on ports and in directories of its
// own, one member SIGKILLed under a relay that is never restarted.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Binary returns the path of a server program a test runs itself: name on
// PATH, or in /usr/sbin or /usr/local/sbin, where Debian puts servers (off
// an ordinary user's PATH). Missing, it fails the test under CI=true and
// skips it loudly otherwise.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := name + " is not installed (not on PATH, nor in /usr/sbin or /usr/local/sbin)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s CLUSTER TESTS: %s ***\n\n", strings.ToUpper(name), msg)
	t.Skip(msg)
	return ""
}

// FreePorts returns n distinct local TCP ports that were free a moment ago:
// a cluster's members must know each other's ports before they start, so
// the OS cannot pick them when they listen. They are picked below the
// kernel's range of ephemeral ports, so that no outgoing connection (a
// member dialling another, a client) takes one before its member listens
// on it, which a port the OS hands out for listening could be.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if p, err := strconv.Atoi(f[0]); err == nil {
				hi = p
			}
		}
	}
	lo := 10000
	if hi-lo < 1000 {
		lo = 1024
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports in %d-%d", n, lo, hi)
		}
		p := lo + rand.IntN(hi-lo)
		if slices.Contains(ports, p) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		ports = append(ports, p)
	}
	return ports
}

// WaitUntil polls check every 20 ms until it returns nil, and fails the
// test with check's last error if that takes more than a minute. It waits
// for a state the test can observe (a cluster formed, a leader elected),
// never for time to pass.
func WaitUntil(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after a minute: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Server is a broker process of a test's private cluster: started with
// StartServer, SIGKILLed with Kill (a crash: no shutdown, nothing flushed
// that the server did not flush itself), started again with the same
// arguments with Start. Its output goes to a log file of its own, whose end
// the test's log shows when the test fails; the process is killed when the
// test ends.
type Server struct {
	Name string
	t    testing.TB
	path string
	args []string
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartServer starts path with args as the cluster member name.
func StartServer(t testing.TB, name, path string, args ...string) *Server {
	t.Helper()
	s := &Server{Name: name, t: t, path: path, args: args, log: filepath.Join(t.TempDir(), name+".log")}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(s.log); err == nil {
				const tail = 4000
				if len(b) > tail {
					b = b[len(b)-tail:]
				}
				t.Logf("end of %s's log (%s):\n%s", name, s.log, b)
			}
		}
	})
	s.Start()
	return s
}

// Start starts the server again after Kill; it is a no-op while it runs.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close() // the process has its own copy
	cmd := exec.Command(s.path, s.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Kill ends its children too (a Redis AOF rewrite)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
}

// Kill SIGKILLs the server's process group and waits for the process to
// exit; it is a no-op when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// ErrConfirmLost is the error a Hold's wrapper gives the relay instead of
// the confirm it held: the confirm lost with the killed member.
var ErrConfirmLost = errors.New("relaytest: the broker's confirm of this publish was lost with the killed member")

// Hold loses one broker confirm across a kill. A test wraps the relay's
// broker client (a go-redis hook, a JetStream wrapper) so that each
// publish the broker confirmed asks Take before the relay sees the
// confirm; the first that Take holds stays with the wrapper until
// MemberKilled has killed the member, and the wrapper then gives the relay
// ErrConfirmLost instead. The relay publishes that message again, to the
// cluster as the kill left it, which must store it once.
type Hold struct {
	accept func(partition int) bool
	taken  atomic.Bool
	held   chan string
	killed chan struct{}
	once   sync.Once
}

// NewHold holds the first confirm past seq 20 of a partition accept
// takes: the kill then lands mid-stream, with progress behind it and the
// held message and the rest of its partition still to go, provided the
// partition has more than 20 messages.
func NewHold(accept func(partition int) bool) *Hold {
	return &Hold{accept: accept, held: make(chan string, 1), killed: make(chan struct{})}
}

// Wants tells a wrapper, before the confirm comes, whether a publish of the
// message at seq of partition might be held: when it says no, the wrapper
// need not call Take.
func (h *Hold) Wants(partition int, seq int64) bool {
	return seq > 20 && !h.taken.Load() && h.accept(partition)
}

// Take is called once the broker confirmed the publish of message id, at
// seq of partition. It returns false at once, and the wrapper passes the
// confirm on, unless the message is the one held: then it returns true
// after the kill, and the wrapper gives the relay ErrConfirmLost.
func (h *Hold) Take(partition int, seq int64, id string) bool {
	if !h.Wants(partition, seq) || !h.taken.CompareAndSwap(false, true) {
		return false
	}
	h.held <- id
	<-h.killed
	return true
}

// release ends the hold: after the kill, or when the test ends first.
func (h *Hold) release() { h.once.Do(func() { close(h.killed) }) }

// MemberKilled runs relay h on a fresh 4-partition queue "orders" of db
// (RelayOptions), enqueues n messages (see Enqueue) and has a member of the
// broker's cluster SIGKILLed mid-stream under it: the relay is never
// restarted. It returns the ids once every one is processed.
//
// The kill is not timed: it comes when hold (which the relay's broker
// client is wrapped with) holds a confirm. kill SIGKILLs the member, the
// held confirm is lost, and down runs, with the id of the message whose
// confirm was lost: it waits for what the test must see while the member
// is down, starts it again if the test does, and may enqueue more. The
// other partitions go on publishing throughout, so the kill also lands on
// publishes in flight.
func MemberKilled(ctx context.Context, t testing.TB, db *bun.DB, h processor.Handler, n int,
	hold *Hold, kill func(), down func(ob *seqbox.Outbox, lost outbox.MessageID)) []outbox.MessageID {
	t.Helper()
	ob, err := seqbox.New(db).Migrate(true).PollInterval(20*time.Millisecond).
		Queue("orders", 4, h, RelayOptions()...).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ob.Stop(ctx) }()
	defer hold.release() // before the stop, if the test fails first
	ids := Enqueue(ctx, t, ob, db, n)
	var id string
	select {
	case id = <-hold.held:
	case <-ctx.Done():
		t.Fatalf("no confirm held (does a partition the hold accepts get more than 20 of the %d messages?): %v", n, ctx.Err())
	}
	lost, err := outbox.ParseMessageID(id)
	if err != nil {
		t.Fatalf("the hold's wrapper gave a bad message id: %v", err)
	}
	kill()
	hold.release()
	down(ob, lost)
	if err := ob.WaitProcessed(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	return ids
}
