package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxy is a Toxiproxy proxy (github.com/Shopify/toxiproxy/v2, run inside
// this process rather than as a server driven over HTTP) between one client
// process and one Redis node: every byte they exchange goes through it, so
// faults apply to that client only. It listens on a loopback port of its
// own.
//
// The faults map onto Toxiproxy as follows. A blackhole is a "timeout"
// toxic with timeout 0 in both directions: connections stay open, bytes are
// dropped, and the client sees silence until its per-node timeout gives up
// on the node; removing the toxic closes those connections, as a partition
// long enough to break them would. Latency is a "latency" toxic on the
// replies. A cut is a "reset_peer" toxic with timeout 0 in both directions:
// every connection, open or new, is reset (TCP RST) at its next byte, so a
// client's call fails at once. The proxy keeps its listener throughout:
// stopping it and listening again later lost the port, now and then, to
// another process on a busy machine.
type proxy struct {
	tp *toxiproxy.Proxy

	mu     sync.Mutex
	toxics map[string]bool // toxics currently on, by name
	closed bool
}

// toxServer is the in-process Toxiproxy server the proxies belong to. Its
// HTTP API is not started: the suite adds and removes toxics directly.
var toxServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

var proxySeq atomic.Int64

// newProxy starts a proxy to target on a free loopback port.
func newProxy(target string) (*proxy, error) {
	name := fmt.Sprintf("chaos-%d-%s", proxySeq.Add(1), target)
	tp := toxiproxy.NewProxy(toxServer(), name, "127.0.0.1:0", target)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("chaos: proxy to %s: %w", target, err)
	}
	return &proxy{tp: tp, toxics: map[string]bool{}}, nil
}

// Addr is the address clients dial instead of the node's.
func (p *proxy) Addr() string {
	p.tp.Lock()
	defer p.tp.Unlock()
	return p.tp.Listen
}

// Target returns the node address connections are forwarded to.
func (p *proxy) Target() string {
	p.tp.Lock()
	defer p.tp.Unlock()
	return p.tp.Upstream
}

// SetLatency delays every reply of the node by d (0: none).
func (p *proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked("latency")
	if d > 0 {
		p.addLocked("latency", "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))
	}
}

// Blackhole drops (on) every byte in both directions while keeping the
// connections open, or (off) ends that, closing the connections it held.
func (p *proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.addLocked("hole-up", "timeout", "upstream", `{"timeout":0}`)
		p.addLocked("hole-down", "timeout", "downstream", `{"timeout":0}`)
		return
	}
	p.removeLocked("hole-up")
	p.removeLocked("hole-down")
}

// Cut resets (on) every connection, open or new, at its next byte, or
// (off) ends that.
func (p *proxy) Cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLocked(on)
}

func (p *proxy) cutLocked(on bool) {
	if p.closed {
		return
	}
	if on {
		p.addLocked("cut-up", "reset_peer", "upstream", `{"timeout":0}`)
		p.addLocked("cut-down", "reset_peer", "downstream", `{"timeout":0}`)
		return
	}
	p.removeLocked("cut-up")
	p.removeLocked("cut-down")
}

// Retarget forwards new connections to addr and closes the open ones, so
// clients reconnect to the new node: what a virtual IP or a Sentinel-aware
// client does after a failover.
func (p *proxy) Retarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	listen := p.Addr()
	if err := p.tp.Update(&toxiproxy.Proxy{Listen: listen, Upstream: addr, Enabled: true}); err != nil {
		panic(fmt.Sprintf("chaos: proxy %s cannot listen again: %v", listen, err))
	}
}

// Heal clears every fault.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.toxics {
		p.removeLocked(name)
	}
	p.cutLocked(false)
}

// Close stops the proxy and closes every connection. It is idempotent.
func (p *proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.tp.Stop()
		p.closed = true
	}
	return nil
}

// addLocked adds a toxic unless one of that name is on. The toxics and
// their JSON are fixed by this file, so an error is a bug.
func (p *proxy) addLocked(name, typ, stream, attrs string) {
	if p.toxics[name] {
		return
	}
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := p.tp.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		panic(fmt.Sprintf("chaos: toxic %s: %v", body, err))
	}
	p.toxics[name] = true
}

func (p *proxy) removeLocked(name string) {
	if !p.toxics[name] {
		return
	}
	if err := p.tp.Toxics.RemoveToxic(context.Background(), name); err != nil {
		panic(fmt.Sprintf("chaos: removing toxic %s: %v", name, err))
	}
	delete(p.toxics, name)
}
