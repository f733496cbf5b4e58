package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// A Lock call's part in a key's line on the nodes, beyond its attempts:
// the lease of keys releases handed to it, leaving the line, and giving
// handed keys back. Each of these is a release call that must reach a
// node after the call's earlier cleanups there (see waiter.pending).

// handedLease is the lease of a Lock call whose waiter id a majority of
// nodes hold as the key's value, set there by releases (release.lua); the
// call learns it from their notices and its attempts' replies. The value
// is the waiter id, and the validity runs from first, read before the
// first script that could put the id in the key's line was sent (before
// the call's first attempt, or before a give-back made the id): a release
// hands the key only to an id in line, so every such SET came after first.
// A handed key keeps the id until the call ends (its lease's release, or
// leaveLine) or gives it back, or it expires: no attempt and no other
// release writes a key that holds it. So once a majority told the call,
// that majority holds the id until first + ttl on their clocks at the
// least (docs/protocol.md, "Hand-off inside the release"). nil: the
// validity is used up, or the Client is closing.
//
// A call that waited most of its ttl gets a lease with little validity
// left. Lock returns it as it is, without an extend first: its Deadline
// says how long it is valid, as for a lease whose attempt took long; an
// extend would cost every such hand-off a round, could fail and would
// then have to give the keys back; and a caller that wants a longer
// lease extends it, as Do's renewal does, which schedules the first
// renewal by the remaining validity (see nextRenewal).
//
// A call with metadata (WithMetadata) stores it on the nodes before Lock
// returns: the release that set the key to its id could not (see
// storeMeta).
func (c *Client) handedLease(key string, ttl time.Duration, waiter string, first time.Time, meta string) *Lease {
	if drift.Validity(ttl, c.cfg.clock.Now().Sub(first), c.cfg.factor) <= 0 {
		return nil
	}
	a := c.newAttempt(key, ttl, waiter, 0, callArgs{meta: meta}) // a fenced call is never handed the key
	// No tombstone on release: no acquire of ours can still be on its way
	// with this value, since no attempt sends a waiter id as its value.
	a.value, a.t0 = waiter, first
	a.rel.Value, a.rel.Tomb = waiter, 0
	l := c.newLease(a)
	if l != nil {
		// The releases that handed us the key set its ttl when they ran:
		// before now where we counted them, and within the cleanup
		// timeout of now where one is still on its way.
		l.mu.Lock()
		l.expiresBy = l.keyExpiry(c.cfg.clock.Now(), c.cfg.cleanup, ttl)
		l.mu.Unlock()
	}
	if l != nil && meta != "" {
		c.storeMeta(l)
	}
	return l
}

// storeMeta writes a handed lease's metadata on every node where the key
// holds the lease's value (meta.lua), waiting for a majority at most one
// node timeout; the other calls finish in the background. Metadata is
// information for people, so a failure is not the lease's: it is logged,
// and Inspect then shows less of it. The write is one round more for a
// hand-off with metadata only; an acquisition writes it in its own round.
//
// Rejected: keeping each waiter's metadata in the key's line on the nodes
// so that the release could copy it over. It costs every waiting call
// with metadata a write per attempt, and a line entry with upkeep in the
// acquire and release scripts (drop, leave, give-back), for one round
// trip saved on a path that already skipped one.
func (c *Client) storeMeta(l *Lease) {
	p := script.NewMeta(script.MetaArgs{Key: l.key, Value: l.value, Metadata: l.meta})
	rctx, cancel := context.WithTimeout(context.Background(), c.nodeTimeout(l.ttl))
	round := quorum.Start(c.pool, rctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		ok, err := p.Run(ctx, c.nodes[i].sn)
		c.observe(i, err)
		return ok, err
	})
	got := round.Await(rctx, c.quorum, func(r quorum.Reply[bool]) bool { return r.Err == nil && r.Val })
	c.spawn(func() {
		defer cancel()
		round.Wait()
	})
	if yes, _, _ := c.tally(got); yes < c.quorum {
		c.cfg.logger.Warn("holder metadata of a handed lease reached too few nodes", "key", l.key, "nodes", yes, "needed", c.quorum)
	}
}

// leaveLine takes a Lock call that gave up out of the key's line on every
// node, in the background, so that releases stop naming it before the
// nodes forget it by themselves (Client.line). It is the release script with a
// value nobody holds and no tombstone: it only leaves the line, and, if a
// release had named the call and the key is free there, passes the
// reservation to the next in line for as long as a release of a lease of
// ttl would reserve it.
//
// After Close it still goes out (everyNode then runs on the caller's
// goroutine, bounded by the cleanup timeout, as a Release after Close
// does): a call that gave up while keys were handed to it must delete
// them, or they wait out its ttl.
func (c *Client) leaveLine(key, waiter string, ttl time.Duration, after <-chan struct{}) <-chan struct{} {
	return c.everyNode(key, ttl, after, c.boxes.Release(script.ReleaseArgs{Key: key, Value: newValue(), Waiter: waiter,
		Window: c.handoffWindow(ttl), Line: c.line}))
}

// giveBack is leaveLine for a Lock call that goes on waiting under a new
// id (next, at place): it gives back the keys releases handed to old and
// takes old's place under next, in one step per node.
// Like leaveLine, it goes out after Close too. The returned channel is
// closed once its calls are over: next's line-leave must come after them,
// or a give-back that lands late would put next back in line.
func (c *Client) giveBack(key, old, next string, place int64, ttl time.Duration, after <-chan struct{}) <-chan struct{} {
	return c.everyNode(key, ttl, after, c.boxes.Release(script.ReleaseArgs{Key: key, Value: newValue(), Waiter: old,
		Window: c.handoffWindow(ttl), Line: c.line, Next: next, Place: place}))
}

// bothDone returns a channel closed once a and b are (nil counts as
// closed).
func (c *Client) bothDone(a, b <-chan struct{}) <-chan struct{} {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	done := make(chan struct{})
	c.spawn(func() {
		<-a
		<-b
		close(done)
	})
	return done
}

// everyNode runs a line-keeping release call p on every node in the
// background, bounded by the cleanup timeout (the down wait for a call of
// ttl to a node that seems down: see releaseOn), once after is closed
// (nil: at once): the last failed attempt's cleanup puts the call back in
// its place where it reaches a node, and p must come after it there. A
// call that misses a node leaves the Lock call in that node's line until
// the node drops it, or names it once (docs/protocol.md, "The line of
// waiters"). The returned channel is closed once p's calls are over.
func (c *Client) everyNode(key string, ttl time.Duration, after <-chan struct{}, p *script.Release) <-chan struct{} {
	done := make(chan struct{})
	c.spawn(func() {
		defer close(done)
		if after != nil {
			<-after // bounded: the cleanup has its own timeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
		defer cancel()
		for _, r := range quorum.Start(nil, ctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
			return c.releaseOn(ctx, i, p, ttl, time.Time{})
		}).Wait() {
			if r.Err != nil {
				c.cfg.logger.Debug("redlock: leaving a key's line failed", "key", keyText(key), "node", r.Node, errAttr(r.Err))
			}
		}
	})
	return done
}

// tally counts a compare-and-act round's replies: yes where the node held
// our value and acted, gone where it no longer held it, and the per-node
// errors of the rest.
func (c *Client) tally(replies []quorum.Reply[bool]) (yes, gone int, errs []error) {
	for _, r := range replies {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, r.Err))
		case r.Val:
			yes++
		default:
			gone++
		}
	}
	return yes, gone, errs
}

// newWaiter returns the waiter of a Lock call of c on key, by value: it
// stays on the call's stack, and an uncontended Lock allocates nothing for
// it.
func (c *Client) newWaiter(key string, ttl time.Duration, cc *callConfig) waiter {
	w := waiter{c: c, key: key, ttl: ttl, place: time.Now().UnixMicro(), retry: cc.retry, args: c.callArgs(cc)}
	w.handoffs = c.handoffs && !w.args.fenced
	if n := len(c.nodes); n > len(w.handedFew) {
		w.handedMany = make([]string, n)
	}
	w.id = c.waiterID(ttl, w.place, w.handoffs)
	return w
}

// waiterID returns a fresh id for a Lock call in a key's line: it starts
// with this Client's id, so that a release's notice comes on the Client's
// own channel, and, without fencing, ends in '~<place>+<ttl ms>': a
// release may then hand the key itself to the call (see handedLease), and
// other calls tell from the place whether it is ahead of them in line.
func (c *Client) waiterID(ttl time.Duration, place int64, handoffs bool) string {
	id := script.WaiterID{Client: c.wake.id, Nonce: newValue()}
	if handoffs {
		id.Place, id.TTL = place, ttl
	}
	return id.String()
}
