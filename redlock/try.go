package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// One acquisition attempt for TryLock and Lock (try): its slot among the
// Client's rounds in flight, the attempt itself (attempt.go), and what it
// hands back.

// outcome is what one call of try hands back to TryLock and Lock.
type outcome struct {
	lease      *Lease
	err        error // a *NotObtainedError, a *ConfigError or ErrClosed
	wait       time.Duration
	took       time.Duration
	unadmitted []int
	unverified []int
	handed     []handOff // nodes that answered that a release handed the key to the Lock call
	ahead      bool      // a node's key was handed to a Lock call ahead of this one
	// cleaned is closed once the failed attempt's cleanup calls are over
	// (nil: none): a call that leaves the line or gives keys back sends
	// that after them, so that a cleanup cannot put it back in line.
	cleaned <-chan struct{}
}

// try runs one acquisition attempt (waiter and place: see newAttempt). On
// any failure it releases the key on every node before returning (nodes
// that do not answer are released in the background).
func (c *Client) try(ctx context.Context, key string, ttl time.Duration, waiter string, place int64, ca callArgs) outcome {
	if err := c.takeRound(ctx, key); err != nil {
		return outcome{err: err}
	}
	a := c.newAttempt(key, ttl, waiter, place, ca)
	a.send(ctx)
	a.await(ctx)
	if a.won(ctx) && a.fenced {
		a.commit(ctx)
	}
	if a.won(ctx) {
		l := c.newLease(a)
		if l == nil {
			// Close began during the attempt: a lease handed out now could
			// outlive the Client's background work. Give the lock back.
			a.abandon()
			return outcome{err: ErrClosed, cleaned: a.cleaned}
		}
		a.leave()
		c.inst.attempt("obtained", key, a.elapsed)
		c.tried(ctx, a, "obtained")
		for _, i := range a.unadmitted {
			c.admit.kick(i) // start its admission; the lock did not need it
		}
		if len(a.unverified) > 0 {
			c.proveSoon(ttl) // nor its vote, but the next lock may
		}
		c.serviceAnswered()
		return outcome{lease: l}
	}
	a.abandon()
	if a.mismatch != nil {
		c.inst.attempt("config", key, a.elapsed)
		c.tried(ctx, a, "config")
		return outcome{err: a.mismatch}
	}
	e := a.failure(ctx)
	if e.Reason == ReasonHeld {
		c.serviceAnswered()
	}
	c.inst.attempt(string(e.Reason), key, a.elapsed)
	c.tried(ctx, a, string(e.Reason))
	return outcome{err: e, wait: e.Wait, took: a.elapsed, unadmitted: a.unadmitted, unverified: a.unverified, handed: a.handed, ahead: a.ahead, cleaned: a.cleaned}
}

// tryAdmitting is one attempt, plus more right away while another can
// succeed where it failed (see retryAfter): after a proof verified nodes
// whose votes did not count, the whole procedure again; after nodes that
// refused to vote because they were not admitted could be admitted at once
// (their quarantine was over), one more try. Each try after the first
// comes once the cleanup of the one before is over, and the outcome's
// cleaned covers every try's cleanup: they all put the call back in line
// where they land, so a line-leave or give-back must wait for them all.
func (c *Client) tryAdmitting(ctx context.Context, key string, ttl time.Duration, waiter string, place int64, ca callArgs) outcome {
	var earlier []<-chan struct{} // the cleanups of the tries before at, oldest first
	joined := func(o outcome) outcome {
		for i := len(earlier) - 1; i >= 0; i-- {
			o.cleaned = c.bothDone(earlier[i], o.cleaned)
		}
		return o
	}
	at := c.try(ctx, key, ttl, waiter, place, ca)
	for {
		next, o := c.retryAfter(ctx, at, ttl)
		if next == noRetry {
			return joined(o)
		}
		// The failed try's cleanup first: the next try would otherwise
		// find its key still on the nodes the cleanup has not reached
		// yet, held by "another owner" (docs/protocol.md, "The try after
		// an admission").
		if !c.awaitCleanup(ctx, at, ttl) {
			return joined(at)
		}
		earlier = append(earlier, at.cleaned)
		at = c.try(ctx, key, ttl, waiter, place, ca)
		if next == retryOnce {
			return joined(at)
		}
	}
}

// retryKind says what tryAdmitting does after a try.
type retryKind int

const (
	noRetry   retryKind = iota // return the outcome retryAfter gives
	retryAll                   // try again, and go on as after the first try
	retryOnce                  // try once more, and return its outcome
)

// retryAfter decides what follows the try at: nothing when it won, ctx
// ended, or nothing changed that could make another try win, with the
// outcome to return; retryAll when a proof verified nodes that answered
// before their identity was verified (see identity.go); retryOnce when
// nodes that were not admitted were admitted now. The round stopped at its
// decision, so more nodes than those that answered may be unadmitted: it
// checks every node not yet seen admitted.
func (c *Client) retryAfter(ctx context.Context, at outcome, ttl time.Duration) (retryKind, outcome) {
	if at.err != nil && len(at.unverified) > 0 && ctx.Err() == nil {
		vctx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
		more, err := c.verify(vctx)
		cancel()
		if err != nil {
			return noRetry, outcome{err: err, cleaned: at.cleaned}
		}
		if more {
			return retryAll, at
		}
	}
	if at.err == nil || len(at.unadmitted) == 0 || ctx.Err() != nil {
		return noRetry, at
	}
	actx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
	admitted, left, mismatch := c.admit.admitNow(actx, c.admit.unseen())
	cancel()
	switch {
	case mismatch != nil:
		return noRetry, outcome{err: mismatch}
	case !admitted:
		c.stillQuarantined(&at, left)
		return noRetry, at
	}
	return retryOnce, at
}

// stillQuarantined completes the error of the try at, refused for want of
// admitted nodes that the admission could not admit yet: when the first
// quarantine (or hold-off) ends, left (0: unknown), and that waiting is
// the remedy; and it sends the quarantine notice.
func (c *Client) stillQuarantined(at *outcome, left time.Duration) {
	var e *NotObtainedError
	if !errors.As(at.err, &e) || e.Reason != ReasonQuarantine {
		return
	}
	// Bootstrap is no remedy here: the attempt itself started the
	// quarantines it found missing, and Bootstrap never ends one
	// (docs/protocol.md, "Bootstrap").
	what, remedy := "quarantine", " (Bootstrap admits only a deployment nobody has used yet)"
	if k := heldOff(e); k > 0 && k == quarantined(e) {
		// A change to these settings is under way: only its hold-off is
		// left to wait out.
		what, remedy = "hold-off", ""
	}
	when := "when their " + what + " ends"
	if left > 0 {
		e.Wait = left
		when = fmt.Sprintf("when the first %s ends, in %v", what, left.Round(time.Millisecond))
		at.wait = left
	}
	e.Detail += "; the nodes admit themselves " + when + remedy
	c.noticeQuarantine(e)
}

// awaitCleanup waits until the cleanup of the failed try at is over, or
// for as long as it can take with nodes that answer: a late reply comes
// within the node timeout and its release within the cleanup timeout. A
// node that does not answer (frozen, with a go-redis client that does not
// honour ctx) can keep the cleanup's calls open for its client's read
// timeout and retries, seconds more; the next try does not wait for it,
// since it cannot find a key of ours there that it would win anyway. It
// reports false if ctx ended first.
func (c *Client) awaitCleanup(ctx context.Context, at outcome, ttl time.Duration) bool {
	if at.cleaned == nil {
		return true
	}
	bound := time.NewTimer(c.nodeTimeout(ttl) + c.cfg.cleanup)
	defer bound.Stop()
	select {
	case <-at.cleaned:
	case <-bound.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// newAttempt prepares one attempt. waiter is the id of the Lock call it
// belongs to ("" for TryLock), which puts the call in the key's line on
// the nodes where it fails, at place, so that a release wakes it by name
// (see acquire.lua).
func (c *Client) newAttempt(key string, ttl time.Duration, waiter string, place int64, ca callArgs) *attempt {
	a := &attempt{c: c, key: key, value: newValue(), ttl: ttl, t0: c.cfg.clock.Now(), waiter: waiter, meta: ca.meta, fenced: ca.fenced}
	a.acq = c.boxes.Acquire(script.AcquireArgs{Key: key, Value: a.value, TTL: ttl, Settings: c.dep.acquire,
		Fencing: ca.fenced, Waiter: waiter, Place: place, Line: c.line, Metadata: ca.meta})
	a.rel = a.acq.ReleaseArgs()
	return a
}

// maxRounds is the most acquisition rounds one Client has in flight: one
// full pipeline per node (see script.maxBatch). An attempt counts from
// before its t0 until every call of its round is over (leave and abandon
// give the slot back), not only until the round is decided: a round
// decided at once (nodes that missed their last deadline are not waited
// for) still has its calls queued for the nodes. Its cleanup does not
// count: each failed attempt leaves at most one, bounded by the cleanup
// timeout, so the cleanups pending are bounded too, by about maxRounds
// times the cleanup timeout over the node timeout.
//
// Without a bound, a burst of Lock calls on many keys (10,000 Do calls
// started within a second, on a host whose cores the nodes share) queues
// more calls in each node's batcher than the node answers within the node
// timeout: every round in the queue times out, each leaves a cleanup of up
// to the cleanup timeout, and Lock retries within 20 to 100 ms, so the
// retries and their cleanups outgrow the nodes' answers and the process's
// goroutines and memory grow until it is killed (docs/performance.md,
// "Many leases on one Client"). With the bound, the calls beyond it wait
// in this process, before their attempt starts: a wait that costs no
// node a call and no lease any validity.
const maxRounds = 256

// takeRound waits for one of the Client's maxRounds slots for an
// acquisition round (see freeRound). It fails only when ctx ends first:
// then no node was contacted.
func (c *Client) takeRound(ctx context.Context, key string) error {
	select {
	case c.rounds <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.rounds <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &NotObtainedError{Key: key, Reason: ReasonCancelled, Needed: c.quorum, Nodes: len(c.nodes),
			Detail: fmt.Sprintf("ctx ended while the attempt waited for one of this Client's %d acquisition rounds in flight to end; no node was contacted", maxRounds),
			Errs:   []error{ctx.Err()}}
	}
}

// freeRound gives back the slot of an attempt whose round's calls are
// all over.
func (c *Client) freeRound() { <-c.rounds }

// newLease turns a won attempt into a lease, valid until ttl - drift after
// the attempt started. It returns nil once Close has begun: a lease must
// not be created that the Client's background work no longer looks after.
func (c *Client) newLease(a *attempt) *Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	// The holder leaves the key's line on every node when it releases
	// (granting nodes already dropped it): no place to go back to.
	l := &Lease{c: c, key: a.key, value: a.value, token: a.token, meta: a.meta, rel: a.releaseArgs(false).Standalone(), prepared: a.release(false), ttl: a.ttl,
		deadline: a.t0.Add(a.ttl - drift.Drift(a.ttl, c.cfg.factor)), done: make(chan struct{}), obtained: c.cfg.clock.Now()}
	l.expiresBy = l.keyExpiry(a.t0, c.nodeTimeout(a.ttl), a.ttl)
	c.held.Add(1)
	l.mu.Lock()
	l.armLocked()
	l.mu.Unlock()
	return l
}
