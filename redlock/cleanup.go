package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

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
// never a second holder (docs/fencing.md, "A release beats a late
// acquire").
func (c *Client) releaseOn(ctx context.Context, i int, p *script.Release, ttl time.Duration) (bool, error) {
	if c.seemsDown(i) {
		dctx, cancel := context.WithTimeout(ctx, c.downWait(ttl))
		defer cancel()
		ctx = dctx
	}
	ok, err := p.Run(ctx, c.nodes[i].sn)
	c.observe(i, err)
	return ok, err
}

// releaseOne releases one node with a detached context, bounded by the
// cleanup timeout (or the down wait: see releaseOn).
func (c *Client) releaseOne(key string, i int, p *script.Release, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, p, ttl); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", keyText(key), "node", i, errAttr(err))
	}
}

// leave hands the round's stragglers to background work that waits for
// them; on success they are part of the lock. A straggler that says it is
// not admitted starts its admission, as one that answered in time does,
// and one not verified yet its proof (see proveSoon).
func (a *attempt) leave() {
	c, round, stop, ttl := a.c, a.round, a.stop, a.ttl
	c.spawn(func() {
		defer stop()
		// One reply at a time, so that a node's admission does not wait
		// for the slowest straggler.
		each := func(quorum.Reply[script.AcquireReply]) bool { return true }
		for {
			got := round.Await(context.Background(), 1, each)
			if len(got) == 0 {
				break
			}
			r := got[0]
			if r.Err == nil && !c.verified(r.Node) {
				c.proveSoon(ttl)
			}
			if r.Err == nil && r.Val.Status == script.Unadmitted {
				c.admit.lost(r.Node)
				c.admit.kick(r.Node)
			}
		}
		round.Wait()
		c.freeRound()
	})
}

// abandon releases a failed round's key on every node that granted or
// answered with an error: an unanswered SET may still land, and the
// release leaves a tombstone there that makes it fail.
// A node that answered anything else is settled and gets nothing. A node
// that has not answered yet is decided by its reply, in the background: a
// grant or an error gets the release, a refusal nothing. Calls already on
// the wire usually answer within a round trip, and a refusal needs no
// release, so contention costs no release per late refusal. abandon waits
// only for the releases of the nodes that granted, so a failed attempt
// leaves nothing behind on the responsive nodes that answered in time when
// it returns, without waiting for unresponsive ones; the rest is handled
// in the background, detached from the caller's ctx, each release bounded
// by the cleanup timeout.
//
// The round's calls are not cancelled: each is already bounded by the node
// timeout (send), and a cancelled call on the wire ends as "context
// canceled" instead of with the node's word, which would cost a release
// (and a tombstone) where a refusal needs none, and would hide a wiped
// node's "not admitted": like leave, the background starts the admission
// of a node whose late reply says so (docs/fencing.md, Liveness).
func (a *attempt) abandon() {
	c := a.c
	granted := make(map[int]bool, len(a.replies))
	// A node that answered anything but "granted" is settled: its script
	// ran once, atomically, and did not take the key (it answers "granted"
	// when the key already holds our value, as after a retried call), so
	// no late SET can follow there and it needs neither a release nor a
	// tombstone. One that granted or answered with an error gets both now.
	settled := make([]bool, len(c.nodes))
	answered := make([]bool, len(c.nodes))
	for _, r := range a.replies {
		answered[r.Node] = true
		if acquired(r) {
			granted[r.Node] = true
		} else if r.Err == nil {
			settled[r.Node] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	ra := a.release(true)
	rel := quorum.Start(c.pool, ctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		if settled[i] || !answered[i] {
			return false, nil
		}
		return c.releaseOn(ctx, i, ra, a.ttl)
	})
	if len(granted) > 0 {
		rel.Await(ctx, len(granted), func(r quorum.Reply[bool]) bool { return r.Err == nil && granted[r.Node] })
	}
	round, stop := a.round, a.stop
	a.cleaned = make(chan struct{})
	cleaned := a.cleaned
	c.spawn(func() {
		defer close(cleaned)
		defer cancel()
		defer stop()
		// The round's calls first: its slot goes back once they are over
		// (see maxRounds), whatever the releases below take.
		late := round.Wait()
		c.freeRound()
		rel.Wait()
		// The late replies (each within a round trip, or at the node
		// timeout from a node that does not answer): a grant, or an
		// error, which leaves the outcome unknown, gets the release; a
		// refusal settles the node. A node that is not admitted starts
		// its admission, as in leave.
		var wg sync.WaitGroup
		for _, r := range late {
			switch {
			case acquired(r) || r.Err != nil:
				wg.Go(func() { c.releaseOne(a.key, r.Node, ra, a.ttl) })
			case r.Val.Status == script.Unadmitted:
				c.admit.lost(r.Node)
				c.admit.kick(r.Node)
			}
		}
		wg.Wait()
	})
}
