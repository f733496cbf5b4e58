package redlock

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// node is one entry of the node list: the client given to New, and its
// record of missed deadlines.
type node struct {
	idx  int
	name string // the address the caller configured, for errors and logs only
	uc   redis.UniversalClient
	sn   *script.Node // runs the scripts on uc

	// missed is set when a call to the node ran out of time (or New's
	// probe did not hear from it) and cleared by its next answer. An
	// acquisition that can only succeed if a node that missed its last
	// deadline answers in time gives up without waiting.
	missed atomic.Bool

	// warming is set while a background PING brings the node a
	// connection back (see warm).
	warming atomic.Bool

	// net keeps the node's last transport error (see transport.go): a call
	// that runs out of time names it as its cause.
	net *transport
}

// observe records the outcome of one call to node i for missed and for its
// last transport error: a reply, even one the script could not have sent,
// is an answer in time.
func (c *Client) observe(i int, err error) {
	nd := c.nodes[i]
	switch {
	case err == nil || isReplyError(err):
		nd.missed.Store(false)
		nd.net.clear()
	case errors.Is(err, context.DeadlineExceeded):
		nd.missed.Store(true)
		c.warm(i)
	case errors.Is(err, context.Canceled):
	case isRedisReply(err):
		nd.missed.Store(false) // it answered, if only to refuse
	default: // a transport error: the connection failed or timed out
		if isTimeout(err) {
			nd.missed.Store(true)
			c.warm(i)
		}
		nd.net.saw(err)
	}
}

// warm gets node i a connection through its handshake in the background,
// after a call to it ran out of time. go-redis closes a connection whose
// call timed out, and sets up the next one (TCP, TLS, HELLO, AUTH) inside
// the next call's budget: the node timeout, 50 ms for a 1 s ttl. On a
// busy host or a long link that may never be enough, and the node would
// miss every round from then on although it answers each call in a few
// milliseconds once connected: a client whose every node timed out once
// got no lock at all until the load went away. A PING under the probe
// timeout, New's bound for the same first contact, makes the connection
// and leaves it in go-redis's pool, so the next call only has to run its
// script in time. Close cannot cut it short (go-redis's handshake honours
// a deadline, not a cancelled ctx), so a longer bound was a longer Close
// after a node froze: 5 s (go-redis's DialTimeout) with the cleanup
// timeout's 10 s. One at a time per node. It leaves missed alone (the
// next call answered in time clears it), clearing only the node's last
// transport error when the PING answers; Close waits for it.
func (c *Client) warm(i int) {
	nd := c.nodes[i]
	if c.isClosed() || !nd.warming.CompareAndSwap(false, true) {
		return
	}
	c.spawn(func() {
		defer nd.warming.Store(false)
		ctx, cancel := context.WithTimeout(c.admit.ctx, c.cfg.probe)
		defer cancel()
		if nd.uc.Ping(ctx).Err() == nil {
			nd.net.clear()
		}
	})
}

// missedLast reports whether node i missed the deadline of its last call.
func (c *Client) missedLast(i int) bool { return c.nodes[i].missed.Load() }

// seemsDown reports whether node i missed its last deadline or failed to
// be reached since its last answer: a release does not wait for it long
// (see Lease.Release).
func (c *Client) seemsDown(i int) bool {
	return c.nodes[i].missed.Load() || c.nodes[i].net.last() != nil
}

// downWait bounds a release's call to a node that seems down: the node
// timeout, but at least downWaitMin, so that a node that is merely slow on
// a busy machine still gets it.
func (c *Client) downWait(ttl time.Duration) time.Duration {
	return min(max(c.nodeTimeout(ttl), downWaitMin), c.cfg.cleanup)
}

const downWaitMin = 100 * time.Millisecond

// isReplyError reports a reply the script could not have sent. Apart
// from observe, which runs on every call, so that a call without an error
// does not pay for the target errors.As needs on the heap.
func isReplyError(err error) bool {
	var bad *script.ReplyError
	return errors.As(err, &bad)
}

// isRedisReply reports an error reply of the server (redis.Nil included).
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// nodeErr is node i's part in a failed round. A refusal is typed (see
// refusal.go), and a call that ran out of time names the node's last
// transport error, which go-redis hides behind the context's error when
// it dials in the background.
func (c *Client) nodeErr(i int, err error) *NodeError {
	// The node's own trouble only: not a key held elsewhere, a
	// quarantine, an identity being checked, or this client's settings
	// disagreeing with a healthy node's (quorumlock.config.errors).
	if !errors.Is(err, ErrNodeHeld) && !errors.Is(err, ErrNodeQuarantined) && !errors.Is(err, ErrConfigMismatch) && !errors.Is(err, errUnverified) {
		c.inst.nodeError(c.nodes[i].name)
	}
	return &NodeError{Node: i, Addr: c.nodes[i].name, Err: c.cause(i, err)}
}

// cause is err as node i's per-node cause: see nodeErr.
// A call that ran out of time on a node whose handshakes fail (a TLS
// certificate it refuses) is typed as that refusal.
func (c *Client) cause(i int, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if last := c.nodes[i].net.last(); last != nil {
			err = &unfinished{last: last, err: err}
		}
	}
	return typed(err)
}
