// Package relaytest has the core's TCP proxy for tests that cut a server's
// connections (Proxy). The relay modules have their own copy, with their
// other helpers, in relay/relaykit/relaytest: a module may not import
// another module's internal packages.
package relaytest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a broker and can cut them: Down closes
// every connection and refuses new ones, as a broker that went away; Up
// accepts again. It stands between a relay and a real server in the
// "broker down" tests.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	refused int
	conns   map[net.Conn]struct{}
}

// NewProxy listens on a free local port for target ("host:port"); it
// closes when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); p.Down() })
	go p.serve()
	return p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.refused++
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Refused counts the connections closed at once because the proxy was
// down: a test that must see a client try while it is down waits for it.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
