package fencing_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// cut says where a cutProxy breaks the connection once armed.
type cut int

const (
	cutNone cut = iota
	// cutBeforeRequest drops the next bytes the client sends and closes
	// both sides: the server never sees the request.
	cutBeforeRequest
	// cutAfterReply lets the request through and closes both sides when the
	// server's ReadyForQuery follows a CommandComplete, before forwarding
	// that ReadyForQuery: the server has run the statement and ended its
	// implicit transaction, or run the COMMIT, and the client never learns.
	cutAfterReply
)

// cutProxy sits between one test's pgx connections and PostgreSQL on
// 127.0.0.1 and breaks a connection at a chosen point of the protocol. The
// server-to-client stream is forwarded one protocol message at a time
// (type byte, int32 length, body), which relies on the DSN's
// sslmode=disable: with TLS the stream would be opaque.
type cutProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	armed   cut
	fired   chan struct{} // closed when the armed cut happened
	conns   []net.Conn
	pumps   sync.WaitGroup
	stopped bool
}

// newCutProxy listens on a free loopback port and forwards to target
// (host:port); it stops, closing every connection, when t ends.
func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, fired: make(chan struct{})}
	p.pumps.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

// arm makes the proxy cut the next request (or reply) on any connection.
func (p *cutProxy) arm(c cut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = c
}

// requireFired asserts the armed cut happened, so a test cannot pass
// because the operation never reached the proxy.
func (p *cutProxy) requireFired(t *testing.T) {
	t.Helper()
	select {
	case <-p.fired:
	default:
		t.Fatal("the proxy never cut the connection")
	}
}

// take reports whether c is armed and disarms it, so that exactly one cut
// happens per arm.
func (p *cutProxy) take(c cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != c {
		return false
	}
	p.armed = cutNone
	close(p.fired)
	return true
}

func (p *cutProxy) isArmed(c cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed == c
}

func (p *cutProxy) accept() {
	defer p.pumps.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed by stop
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns = append(p.conns, client, server)
		p.pumps.Add(2)
		p.mu.Unlock()
		closeBoth := func() { client.Close(); server.Close() }
		go func() {
			defer p.pumps.Done()
			defer closeBoth()
			p.clientToServer(client, server)
		}()
		go func() {
			defer p.pumps.Done()
			defer closeBoth()
			p.serverToClient(server, client)
		}()
	}
}

func (p *cutProxy) clientToServer(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if p.take(cutBeforeRequest) {
				return // the bytes just read are dropped
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutProxy) serverToClient(server, client net.Conn) {
	r := bufio.NewReader(server)
	var header [5]byte
	sawComplete := false
	for {
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return
		}
		length := binary.BigEndian.Uint32(header[1:])
		if length < 4 {
			return // not the PostgreSQL protocol: refuse to guess
		}
		body := make([]byte, length-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch header[0] {
		case 'C': // CommandComplete
			sawComplete = p.isArmed(cutAfterReply)
		case 'Z': // ReadyForQuery
			if sawComplete && p.take(cutAfterReply) {
				return
			}
			sawComplete = false
		}
		if _, err := client.Write(append(header[:], body...)); err != nil {
			return
		}
	}
}

func (p *cutProxy) stop() {
	p.mu.Lock()
	p.stopped = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.pumps.Wait()
}

// proxied opens a connection to dsn's database through p. The caller's
// *pgx.Conn is one session, so the proxy's cut hits exactly the statement
// the test runs on it (a pool could ping or reconnect behind its back).
func proxied(t *testing.T, p *cutProxy, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	require.Nil(t, cfg.TLSConfig, "the proxy reads the protocol: the DSN must disable TLS")
	host, port, err := net.SplitHostPort(p.ln.Addr().String())
	require.NoError(t, err)
	cfg.Host = host
	portNum, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	cfg.Port = uint16(portNum)
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// targetOf returns the host:port a DSN points at.
func targetOf(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}
