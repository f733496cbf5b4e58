// Package delayproxy is an in-process TCP proxy that delays every byte sent
// towards the upstream by a fixed time: a real latency fault on one node,
// seen by every client that connects through the proxy. Bytes keep their
// order and pipelined requests stay pipelined (each chunk is held until
// the moment it was read plus the delay), so the proxy adds latency without
// limiting throughput, as a long network path would.
package delayproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy listens on a loopback port and forwards to one upstream address.
type Proxy struct {
	Addr     string // where clients should connect
	upstream string
	delay    time.Duration
	ln       net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards every connection to
// upstream, delaying the client-to-upstream direction by delay.
func Start(upstream string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, delay: delay, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) serve(down net.Conn) {
	if !p.track(down) {
		return
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		p.untrack(down)
		return
	}
	if !p.track(up) {
		p.untrack(down)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.delayed(up, down) })
	wg.Go(func() { _, _ = io.Copy(down, up); closeWrite(down) })
	wg.Wait()
	p.untrack(down, up)
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		if p.conns != nil {
			delete(p.conns, c)
		}
	}
}

type chunk struct {
	due  time.Time
	data []byte
}

// delayed copies src to dst, writing each chunk read from src no earlier
// than p.delay after it was read.
func (p *Proxy) delayed(dst, src net.Conn) {
	q := make(chan chunk, 1024)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer closeWrite(dst)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(ch.data); err != nil {
				for range q { // drain so the reader never blocks
				}
				return
			}
		}
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{due: time.Now().Add(p.delay), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			break
		}
	}
	close(q)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// Close stops accepting, closes every proxied connection and waits for
// the proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
