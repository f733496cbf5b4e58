package redlock

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// switchProxy forwards TCP connections to a target it can be re-pointed
// to, as a proxy or a DNS name in front of a Redis server can be: repoint
// closes every connection open through it, so that the client reconnects,
// to the new target.
type switchProxy struct {
	ln    net.Listener
	pumps sync.WaitGroup

	mu      sync.Mutex
	target  string
	conns   []net.Conn
	stopped bool
}

// newSwitchProxy listens on a free loopback port and forwards to target
// (host:port) until t ends.
func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &switchProxy{ln: ln, target: target}
	p.pumps.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

func (p *switchProxy) Addr() string { return p.ln.Addr().String() }

func (p *switchProxy) accept() {
	defer p.pumps.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed by stop
		}
		p.mu.Lock()
		server, err := net.Dial("tcp", p.target)
		if err != nil || p.stopped {
			p.mu.Unlock()
			client.Close()
			if server != nil {
				server.Close()
			}
			continue
		}
		p.conns = append(p.conns, client, server)
		p.pumps.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

func (p *switchProxy) pipe(dst, src net.Conn) {
	defer p.pumps.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// repoint sends every new connection to target and closes the open ones.
func (p *switchProxy) repoint(target string) {
	p.mu.Lock()
	p.target = target
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *switchProxy) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.ln.Close()
	p.repoint("")
	p.pumps.Wait()
}
