package chaos

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// peerGate is the HTTP proxy one etcd member sends all its peer traffic
// through (its HTTP_PROXY; etcd's peer transport honours it). Since each
// member has a gate of its own, a gate knows who is talking, which a TCP
// proxy in front of the listener cannot: every member dials the same
// advertised peer URL of a member, and etcd derives the member's id from
// it. Cutting member m off from its peers is then: m's gate refuses
// everything, and every other gate refuses m's peer address; requests
// already under way (raft's long-lived streams) are broken off.
type peerGate struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{} // closed when Serve returned

	mu      sync.Mutex
	all     bool            // refuse every request
	refused map[string]bool // target host:port refused
	active  map[*gateReq]struct{}
}

type gateReq struct {
	target string
	cancel context.CancelFunc
}

var silentLog = log.New(io.Discard, "", 0)

// newPeerGate starts a gate on a free loopback port.
func newPeerGate() (*peerGate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &peerGate{ln: ln, served: make(chan struct{}), refused: map[string]bool{}, active: map[*gateReq]struct{}{}}
	rp := &httputil.ReverseProxy{
		// The request is a proxy request: its URL names the member.
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme = "http" },
		FlushInterval: -1, // raft's streams must not sit in a buffer
		Transport:     &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext},
		// A stream broken off by a cut is an error to it; not to us.
		ErrorLog:     silentLog,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		req := &gateReq{target: r.URL.Host, cancel: cancel}
		if !g.admit(req) {
			// As a cut link looks to the member: no answer, the
			// connection closes.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		defer g.done(req)
		rp.ServeHTTP(w, r.WithContext(ctx))
	}), ReadHeaderTimeout: 5 * time.Second, ErrorLog: silentLog}
	go func() {
		defer close(g.served)
		_ = g.srv.Serve(ln)
	}()
	return g, nil
}

// Addr is the gate's address, for HTTP_PROXY.
func (g *peerGate) Addr() string { return g.ln.Addr().String() }

func (g *peerGate) admit(r *gateReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.all || g.refused[r.target] {
		return false
	}
	g.active[r] = struct{}{}
	return true
}

func (g *peerGate) done(r *gateReq) {
	g.mu.Lock()
	delete(g.active, r)
	g.mu.Unlock()
}

// refuseAll refuses (on) or admits again every request through the gate,
// breaking off those under way.
func (g *peerGate) refuseAll(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.all = on
	if on {
		for r := range g.active {
			r.cancel()
		}
	}
}

// refuse refuses (on) or admits again requests to target (host:port),
// breaking off those under way.
func (g *peerGate) refuse(target string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !on {
		delete(g.refused, target)
		return
	}
	g.refused[target] = true
	for r := range g.active {
		if r.target == target {
			r.cancel()
		}
	}
}

func (g *peerGate) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = g.srv.Close() // raft's streams never end by themselves
	}
	<-g.served
	return err
}

// localPeerHost is an IPv4 address of this machine other than loopback,
// for the members' peer URLs, or "" if it has none.
func localPeerHost() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
