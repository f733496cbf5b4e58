package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// A node's last transport error. go-redis v9 dials in the background and
// hands a call that runs out of time the context's error, so the per-node
// cause would say "context deadline exceeded" where the reason is
// "connect: connection refused". New puts a dial hook on each node client
// that records failed dials, and the calls record the transport errors
// they see; a per-node cause for a call that did not finish names the last
// one.
//
// One hook per go-redis client, however many Clients are built over it:
// a service that builds a Client per request over shared node clients
// must not grow the client's hook chain. The record is keyed by a weak
// pointer and dropped when the go-redis client is collected.
//
// Rejected: redis.SetLogger to catch the pool's "failed to dial" lines
// (a global that belongs to the application), and dialing the node
// ourselves to find out (a second connection attempt per failed call).

// transport is the last transport error seen on one go-redis client.
type transport struct{ err atomic.Pointer[error] }

func (t *transport) saw(err error) {
	if t != nil && err != nil {
		t.err.Store(&err)
	}
}

func (t *transport) clear() {
	if t != nil && t.err.Load() != nil {
		t.err.Store(nil)
	}
}

// last returns the last transport error, nil when the node's last call
// succeeded or none failed yet.
func (t *transport) last() error {
	if t == nil {
		return nil
	}
	if p := t.err.Load(); p != nil {
		return *p
	}
	return nil
}

var transports sync.Map // weak.Pointer[redis.Client] -> *transport

// transportOf returns the record of uc's transport errors, adding the dial
// hook the first time uc is seen. Clients other than *redis.Client get a
// record of their own, kept from the calls only.
func transportOf(uc redis.UniversalClient) *transport {
	rc, ok := uc.(*redis.Client)
	if !ok {
		return &transport{}
	}
	k := weak.Make(rc)
	if v, ok := transports.Load(k); ok {
		return v.(*transport)
	}
	v, loaded := transports.LoadOrStore(k, &transport{})
	t := v.(*transport)
	if !loaded {
		rc.AddHook(dialWatch{t})
		runtime.AddCleanup(rc, func(k weak.Pointer[redis.Client]) { transports.Delete(k) }, k)
	}
	return t
}

// dialWatch records failed dials; it changes nothing.
type dialWatch struct{ t *transport }

func (h dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			h.t.saw(err)
		}
		if _, ok := conn.(*tls.Conn); ok && err == nil {
			conn = &tlsWatch{Conn: conn, t: h.t}
		}
		return conn, err
	}
}

// tlsWatch records a TLS alert by which a node refuses the client's
// certificate. With TLS 1.3 the client's side of the handshake ends
// before the node has checked the client's certificate, so the dial
// succeeds and the alert arrives on the first read; go-redis then retries
// the command with backoff, and without the record New's probe would see
// a node that is slow, not one that refuses. The node closes the
// connection after its alert, so the first write can fail with a reset
// before anything reads the alert: a write that fails on a connection
// that never read reads the alert, which is then the error.
type tlsWatch struct {
	net.Conn
	t    *transport
	read atomic.Bool // a read succeeded: the node accepted the handshake
}

// alertWait bounds the read of an alert after a failed first write: the
// alert, when there is one, arrived before the reset did.
const alertWait = 50 * time.Millisecond

func (c *tlsWatch) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	switch {
	case err == nil:
		c.read.Store(true)
	case tlsRefusal(err) != "":
		c.t.saw(err)
	}
	return n, err
}

func (c *tlsWatch) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil || c.read.Load() {
		return n, err
	}
	if tlsRefusal(err) == "" {
		_ = c.Conn.SetReadDeadline(time.Now().Add(alertWait))
		var one [1]byte
		if _, rerr := c.Conn.Read(one[:]); rerr != nil && tlsRefusal(rerr) != "" {
			err = rerr
		}
	}
	if tlsRefusal(err) != "" {
		c.t.saw(err)
	}
	return n, err
}

func (c *tlsWatch) NetConn() net.Conn { return c.Conn }

func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// unfinished is the cause of a call that ran out of time on a node whose
// last transport error says why. It matches both.
type unfinished struct{ last, err error }

func (e *unfinished) Error() string { return e.last.Error() + " (" + e.err.Error() + ")" }

func (e *unfinished) Unwrap() []error { return []error{e.last, e.err} }
