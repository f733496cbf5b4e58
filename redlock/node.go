package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The nodes as the Client sees them: each entry's health (missed
// deadlines, the last transport error, a connection warmed back up), New's
// probe of them, the one release call to a node that every release goes
// through, and each node's part in a failed call (nodeErr, mismatch).

// node is one entry of the node list: the client given to New (as a
// driver.Conn), and its record of missed deadlines.
type node struct {
	idx  int
	name string // the address the caller configured, for errors and logs only
	conn driver.Conn
	sn   *script.Node // runs the scripts on conn

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
		if _, err := nd.conn.Do(ctx, "ping"); err == nil {
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

// releaseOn runs the compare-and-delete call p (an attempt's release:
// see attempt.release) on node i. It reports whether the node held our value
// and deleted it. Where the key is not ours, the release leaves a
// tombstone for the attempt's ttl, the longest our own acquire could still
// hold the key if it landed after the release (see release.lua).
//
// Every release call goes through here: a lease's Release, a failed
// attempt's cleanup, a Lock call's line-leave and give-back. A node that
// seems down (it missed its last deadline or could not be reached) gets
// the down wait for a call of ttl (the node timeout, at least 100 ms)
// instead of ctx's longer bound: waiting the cleanup timeout for it kept a
// process from exiting (Close waits for the calls) long after it knew its
// outcome, and a release it misses costs that node's key for one ttl,
// never a second holder (docs/protocol.md, "A release beats a late
// acquire").
//
// until is the latest moment the key may still exist on the nodes (zero
// for none): a call still queued for the node when ctx ends goes out
// anyway before then (a lease's Release: docs/protocol.md, "A release
// given up on still goes out").
func (c *Client) releaseOn(ctx context.Context, i int, p *script.Release, ttl time.Duration, until time.Time) (bool, error) {
	if c.seemsDown(i) {
		dctx, cancel := context.WithTimeout(ctx, c.downWait(ttl))
		defer cancel()
		ctx = dctx
	}
	ok, err := p.RunUntil(ctx, c.nodes[i].sn, until)
	c.observe(i, err)
	return ok, err
}

// releaseOne releases one node with a detached context, bounded by the
// cleanup timeout (or the down wait: see releaseOn).
func (c *Client) releaseOne(key string, i int, p *script.Release, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, p, ttl, time.Time{}); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", keyText(key), "node", i, errAttr(err))
	}
}

// isReplyError reports a reply the script could not have sent. Apart
// from observe, which runs on every call, so that a call without an error
// does not pay for the target errors.As needs on the heap.
func isReplyError(err error) bool {
	var bad *script.ReplyError
	return errors.As(err, &bad)
}

// isRedisReply reports an error reply of the server.
func isRedisReply(err error) bool {
	var re driver.Error
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

func (c *Client) mismatch(i int, theirs string, pending bool) *ConfigError {
	return &ConfigError{Node: i, Addr: c.nodes[i].name, Deployment: theirs, Client: c.dep.marker, Pending: pending}
}

// movingHere reports whether marker is a reconfiguration to this client's
// settings: the node votes for it once its hold-off is over.
func (c *Client) movingHere(marker string) bool {
	to, ok := script.MovingTo(marker)
	return ok && to == c.dep.marker
}

// probe checks, on the nodes that answer, that each is a primary of a
// Redis the scripts run on and accepts this client, and verifies their
// identities: two entries that reach the same server are refused with a
// *DuplicateNodeError. It waits for every node up to the probe timeout,
// but only probeGrace more once a majority has answered. ctor is the
// constructor its errors name.
func (c *Client) probe(ctor string) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.probe)
	defer cancel()
	type probed struct {
		info, ident string
		bad         error // from checkInfo: the node cannot be a Redlock node
	}
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (probed, error) {
		info, err := infoOf(ctx, c.nodes[i].conn)
		c.observe(i, err)
		switch re := refusal(err); {
		case err == nil:
		case re != nil && strings.HasPrefix(re.Err.Error(), "NOPERM"):
			info = "" // ACLs often deny INFO: the scripts are what must be allowed
		case re != nil:
			return probed{}, re
		default:
			return probed{}, err
		}
		if err := checkInfo(info); err != nil {
			return probed{info: info, bad: err}, nil
		}
		// The server's identity in the same round (see identity.go); a node
		// that cannot run it is verified later, when it first answers.
		ident, err := c.nodes[i].sn.Ident(ctx, newValue())
		if re := refusal(err); re != nil {
			return probed{}, re
		}
		return probed{info: info, ident: ident}, nil
	})
	answered := func(rep quorum.Reply[probed]) bool { return rep.Err == nil || refusal(rep.Err) != nil }
	replies := r.Await(ctx, c.quorum, answered)
	if len(replies) < n {
		// A refusal makes New fail only when the refusals leave no
		// majority: once one is heard, hear the rest out (up to the
		// probe timeout) to tell.
		wait := ctx
		if !slices.ContainsFunc(replies, func(rep quorum.Reply[probed]) bool { return refusal(rep.Err) != nil }) {
			gctx, gcancel := context.WithTimeout(ctx, probeGrace)
			defer gcancel()
			wait = gctx
		}
		replies = append(replies, r.Await(wait, n-len(replies), answered)...)
	}
	r.Cancel()
	c.spawn(func() { r.Wait() }) // default go-redis clients ignore ctx: let stragglers finish on their own
	idents := make([]string, n)
	defer func() {
		if err == nil {
			_, err = c.prove(idents)
		}
	}()
	heard := 0
	var refused []nodeRefusal
	for _, rep := range replies {
		nd := c.nodes[rep.Node]
		if re := refusal(rep.Err); re != nil {
			refused = append(refused, nodeRefusal{rep.Node, re})
			continue
		}
		if rep.Err != nil {
			c.cfg.logger.Warn("redlock: node did not answer the startup probe", "node", rep.Node, "addr", nd.name, "err", c.cause(rep.Node, rep.Err))
			continue
		}
		if rep.Val.bad != nil {
			if c.cfg.refusalsOK {
				// A tool that reports on the deployment (check, status)
				// says what is wrong with the node instead of failing.
				c.cfg.logger.Warn("redlock: node cannot be a Redlock node; its calls fail", "node", rep.Node, "addr", nd.name, "err", rep.Val.bad)
				continue
			}
			return fmt.Errorf("redlock: %s: node %d (%s): %w", ctor, rep.Node, nd.name, rep.Val.bad)
		}
		heard++
		idents[rep.Node] = rep.Val.ident
		if n := infoField(rep.Val.info, "connected_slaves"); n != "" && n != "0" {
			c.cfg.logger.Warn("redlock: node has replicas; a failover to one of them can forget granted locks while keeping the node admitted",
				"node", rep.Node, "addr", nd.name, "replicas", n)
		}
		if p := infoField(rep.Val.info, "maxmemory_policy"); p != "" && p != "noeviction" {
			c.cfg.logger.Warn("redlock: node evicts keys when full (maxmemory-policy "+p+"); an evicted key is a forgotten lock: set noeviction",
				"node", rep.Node, "addr", nd.name, "maxmemory_policy", p)
		}
	}
	for _, i := range missingOf(n, replies) {
		last := c.nodes[i].net.last()
		if re := refusal(last); re != nil {
			// A refused TLS handshake: go-redis retries a failed dial
			// with backoff before the call returns, which outlasts the
			// grace, but the dial hook has seen the refusal already.
			refused = append(refused, nodeRefusal{i, re})
			continue
		}
		// It missed the probe's deadline: until it answers, attempts do
		// not wait for it and releases wait for it no longer than the node
		// timeout (see node.missed).
		c.nodes[i].missed.Store(true)
		args := []any{"node", i, "addr", c.nodes[i].name}
		if last != nil {
			args = append(args, "err", last)
		}
		c.cfg.logger.Warn("redlock: node did not answer the startup probe in time; it is checked when it first answers", args...)
	}
	if len(refused) > 0 && !c.cfg.refusalsOK && n-len(refused) < c.quorum {
		// Too few nodes are left to grant a lock: a configuration error,
		// which waiting does not fix.
		slices.SortFunc(refused, func(a, b nodeRefusal) int { return a.node - b.node })
		first := refused[0]
		return fmt.Errorf("redlock: %s: node %d (%s) %w; %d of %d nodes refuse this client, which leaves fewer than the %d a lock needs",
			ctor, first.node, c.nodes[first.node].name, first.err, len(refused), n, c.quorum)
	}
	for _, r := range refused {
		// A minority: the deployment grants without them, tolerating as
		// many node failures fewer, until the client or the node is fixed.
		c.cfg.logger.Warn("redlock: node refused this client; locks are granted without it, with one node failure fewer to spare until it is fixed",
			"node", r.node, "addr", c.nodes[r.node].name, "err", r.err)
	}
	if heard < c.quorum {
		// Not an error: a service may start before its nodes do, and Lock
		// reports the nodes' causes. But say it, once.
		c.cfg.logger.Warn("redlock: fewer than a majority of nodes answered the startup probe: no lock can be obtained until more answer",
			"answered", heard, "nodes", n, "needed", c.quorum)
	}
	return nil
}
