package redlock

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

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
	setup   time.Duration // how long a new connection waits before it is forwarded
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
		p.pumps.Add(1)
		go p.connect(client)
	}
}

// connect forwards client to the target, once its setup delay passed.
func (p *switchProxy) connect(client net.Conn) {
	defer p.pumps.Done()
	p.mu.Lock()
	setup := p.setup
	p.mu.Unlock()
	time.Sleep(setup)
	p.mu.Lock()
	server, err := net.Dial("tcp", p.target)
	if err != nil || p.stopped {
		p.mu.Unlock()
		client.Close()
		if server != nil {
			server.Close()
		}
		return
	}
	p.conns = append(p.conns, client, server)
	p.pumps.Add(2)
	p.mu.Unlock()
	go p.pipe(server, client)
	go p.pipe(client, server)
}

// slowSetup closes every connection open through the proxy and makes each
// new one wait d before its bytes are forwarded, as a connection's setup
// (TCP and TLS handshakes, HELLO, AUTH) takes on a busy host or a long
// link; a connection once set up is as fast as before.
func (p *switchProxy) slowSetup(d time.Duration) {
	p.mu.Lock()
	p.setup = d
	p.mu.Unlock()
	p.repoint(p.targetNow())
}

func (p *switchProxy) targetNow() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
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
