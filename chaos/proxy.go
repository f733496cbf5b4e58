package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP fault proxy between one client process and one Redis
// node: every byte the client and the node exchange goes through it, so it
// can delay the node's replies or stop forwarding altogether, for this
// client only. It listens on a loopback port of its own.
//
// A blackhole stops forwarding in both directions but keeps the
// connections open and the bytes queued, as a partition with TCP
// retransmission does: the client sees no error, only silence, and its
// per-node timeout gives up on the node. When the partition heals the
// queued bytes are delivered late. Cut instead closes every connection and
// refuses new ones at once (a reset rather than silence).
//
// Rejected design: toxiproxy. Its Go server is not available from the
// module proxy this project may use, and three fault modes on a raw byte
// stream are less code than driving its HTTP API.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	cond    *sync.Cond
	target  string
	latency time.Duration
	hole    bool
	cut     bool
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy starts a proxy to target on a free loopback port.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the node's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the node address connections are forwarded to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetLatency delays every chunk the node sends back by d (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Blackhole stops (on) or resumes (off) forwarding in both directions.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.hole = on
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Cut closes every open connection and, while on, closes new ones at once.
func (p *Proxy) Cut(on bool) {
	p.mu.Lock()
	p.cut = on
	if on {
		p.dropLocked()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Retarget forwards new connections to addr and closes the open ones, so
// clients reconnect to the new node: what a virtual IP or a Sentinel-aware
// client does after a failover.
func (p *Proxy) Retarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.dropLocked()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Heal clears every fault.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.latency, p.hole, p.cut = 0, false, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	p.dropLocked()
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		target := p.target
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c, target)
	}
}

func (p *Proxy) serve(client net.Conn, target string) {
	defer p.wg.Done()
	defer p.forget(client)
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		_ = client.Close() // the node is down: the client sees a closed connection
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = up.Close()
		_ = client.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.forget(up)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, client, false) })
	wg.Go(func() { p.pipe(client, up, true) })
	wg.Wait()
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// pipe copies src to dst chunk by chunk, honouring the faults before each
// chunk. reply marks the node-to-client direction, which carries latency.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d, ok := p.gate()
			if !ok {
				return
			}
			if reply && d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// gate waits while the proxy is blackholed and returns the latency to add;
// ok is false once the proxy was closed or cut.
func (p *Proxy) gate() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.hole && !p.closed && !p.cut {
		p.cond.Wait()
	}
	return p.latency, !p.closed && !p.cut
}
