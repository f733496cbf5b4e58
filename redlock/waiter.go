package redlock

import (
	"context"
	"errors"
	"time"
)

// waiter is one Lock call in a key's line: its id and place there, its
// hold on this Client's gate for the key, its registration for release
// notices, the nodes that handed it the key, and the cleanups its line
// calls must come after. Lock drives it; only Lock's goroutine uses it.
//
// The call's place in the key's line on the nodes is when it began, the
// same on every node, so that every node orders the line alike and a
// release names the same waiter everywhere; a release wakes the first in
// line by name instead of every waiter at once. Its id starts with this
// Client's, so the notice comes on the Client's own channel.
type waiter struct {
	c     *Client
	key   string
	ttl   time.Duration
	place int64
	id    string
	retry func(attempt int) time.Duration // the call's retry policy
	args  callArgs                        // what its attempts carry besides the key
	// handoffs says the call takes keys a release hands it (see
	// waiterID): its Client's WithKeyHandOff, for an unfenced call.
	handoffs bool

	pass       func()   // this call's place at the head of the key's local line (nil: not there)
	wake       chan int // release notices (nil until registered)
	unregister func()
	last       outcome   // the last attempt's (or local wait's) outcome
	since      time.Time // when the last attempt started
	inLine     bool      // an attempt reached the nodes, so the call may be in line there
	// pending is closed once every cleanup of a failed attempt under the
	// current id, and the give-back that made the id, is over: each puts
	// the id in its place in line where it lands, so leaving the line (or
	// giving keys back) must come after all of them.
	pending <-chan struct{}
	// Nodes where a release handed the key to id (attempts' replies; the
	// waker counts the notices: see nodesHanded), and when the first
	// attempt that put id in line began: see handedLease.
	handedFew  [16]string
	handedMany []string // instead of handedFew, for more nodes
	first      time.Time
	gaveBack   time.Time // when the call last gave keys back
	// down counts the attempts in a row that failed because the lock
	// service could not grant the key (IsUnavailable): see backoff.
	down int
}

// nodesHanded is, per node, the id of the server whose release handed
// the key to id ("" for none: see handedTo). It is a view of the waiter's
// own storage: a waiter with a pointer into itself would escape to the
// heap, so the view is made on every use and never kept.
func (w *waiter) nodesHanded() []string {
	if w.handedMany != nil {
		return w.handedMany
	}
	return w.handedFew[:len(w.c.nodes)]
}

// enter waits for the call's turn at the head of this Client's line for
// the key, at most limit (see gates.enter); the call may be left without
// it (w.pass nil) when the limit passed.
func (w *waiter) enter(ctx context.Context, limit time.Duration) error {
	p, err := w.c.gates.enter(ctx, w.key, w.c.closing, limit)
	w.pass = p
	return err
}

// attempt makes the call's n-th attempt. It returns the lease, or the
// error that ends the call, or neither when the call goes on waiting.
func (w *waiter) attempt(ctx context.Context, n int) (*Lease, error) {
	c := w.c
	w.since = time.Now()
	if w.wake != nil {
		c.wake.attempting(w.wake)
	}
	if w.first.IsZero() {
		w.first = c.cfg.clock.Now()
	}
	w.last = c.tryAdmitting(ctx, w.key, w.ttl, w.id, w.place, w.args)
	w.inLine = true
	if w.last.err == nil {
		return w.won(w.last.lease)
	}
	w.pending = c.bothDone(w.pending, w.last.cleaned)
	if errors.Is(w.last.err, ErrConfigMismatch) || errors.Is(w.last.err, ErrClosed) {
		return nil, w.last.err
	}
	handed := w.nodesHanded()
	for _, h := range w.last.handed {
		handed[h.node] = h.server
	}
	// Give the handed keys back when a call ahead in line holds a handed
	// key too: releases split the nodes between them, and the call ahead
	// must get this call's keys, not wait with it until they expire (see
	// giveBack). At most once per retry delay, though: where nobody else
	// is in line (the call ahead holds its keys but is not in line here,
	// say its process died after releases handed it a majority), the
	// give-back hands the keys straight back to this call's new id and
	// tells it, which wakes it for another attempt, another -6 and another
	// give-back, one round every few ms for as long as the call ahead
	// holds its keys.
	ahead := w.last.ahead && (w.gaveBack.IsZero() || time.Since(w.gaveBack) >= w.retry(n))
	if l := w.handedOff(ahead); l != nil {
		return w.won(l)
	}
	if ctx.Err() != nil {
		return nil, w.stopped(ctx, ctx.Err())
	}
	return nil, nil
}

// won hands the lease to the caller: it holds the call's gate until it
// ends and, with hand-offs, leaves the line after the call's cleanups.
func (w *waiter) won(l *Lease) (*Lease, error) {
	w.last = outcome{lease: l}
	w.c.serviceAnswered() // a hand-off makes no attempt of its own
	if w.handoffs {
		l.leaveAfter(w.id, w.pending)
	}
	l.holdGate(w.pass)
	w.pass = nil
	return l, nil
}

// handedOff returns the lease of the nodes that handed the key to the
// call, once they are a majority; when the call holds some of them but no
// lease and giveBack is set, it gives them back (see giveBack) and waits
// on under a new id, so that nodes handed to different waiters cannot
// keep each other from a majority until the keys expire.
func (w *waiter) handedOff(giveBack bool) *Lease {
	c := w.c
	n := c.wake.handedTo(w.key, w.id, w.nodesHanded())
	if n >= c.quorum {
		if l := c.handedLease(w.key, w.ttl, w.id, w.first, w.args.meta); l != nil {
			return l
		}
		giveBack = true // the validity is used up: so are the keys
	}
	if n == 0 || !giveBack {
		return nil
	}
	if c.isClosed() {
		// The call ends (ErrClosed): no new id to wait on. Its line-leave
		// under this id deletes the keys that hold it (leaveLine), so the
		// next in line gets them now and not once they expire.
		return nil
	}
	// The new id takes the old one's place on every node in the same step
	// as the give-back (release.lua), so it is in line before anything
	// handed back is handed on, and it listens before that step is sent.
	old := w.id
	w.first = c.cfg.clock.Now() // before the id exists: see handedLease
	w.id = c.waiterID(w.ttl, w.place, w.handoffs)
	clear(w.nodesHanded())
	if w.unregister != nil {
		w.unregister()
		w.wake, w.unregister, _ = c.wake.register(w.key, w.id, time.Now())
	}
	// The give-back puts the new id in line where it lands: the new id's
	// line-leave, or its lease's Release, comes after it.
	w.pending = c.giveBack(w.key, old, w.id, w.place, w.ttl, w.pending)
	w.gaveBack = time.Now()
	return nil
}

// listen registers the call for release notices, once. It reports whether
// the call may sleep now: not when the key's subscription was not live
// before the failed attempt began, since a release in between would go
// unnoticed; the call then tries again at once.
func (w *waiter) listen(ctx context.Context) bool {
	c := w.c
	if w.wake != nil {
		return true
	}
	ch, unregister, live := c.wake.register(w.key, w.id, w.since)
	w.wake, w.unregister = ch, unregister
	if live {
		return true
	}
	if w.handoffs {
		// A release may hand this call the key and tell it only by notice:
		// wait until a majority listens (at most the cleanup timeout), so
		// that none after the retry goes unheard.
		t := time.NewTimer(c.cfg.cleanup)
		select {
		case <-c.wake.subscribed(w.key):
		case <-t.C:
		case <-ctx.Done():
		case <-c.closing:
		}
		t.Stop()
	}
	return false
}

// stopped is the call's error when it stops waiting because of why: ctx's
// error (or its WaitAtMost bound, ctx's cause then) or ErrClosed.
func (w *waiter) stopped(ctx context.Context, why error) error {
	var bound waitBound
	if !errors.Is(why, ErrClosed) && errors.As(context.Cause(ctx), &bound) {
		why = bound
	}
	return w.c.stopped(w.key, w.last.err, why)
}

// close ends the call: it leaves the key's line on the nodes if an
// attempt put it there and it holds no lease (after every earlier cleanup:
// see pending), stops listening and passes this Client's gate on.
func (w *waiter) close() {
	if w.inLine && w.last.err != nil {
		w.c.leaveLine(w.key, w.id, w.ttl, w.pending)
	}
	if w.unregister != nil {
		w.unregister()
	}
	if w.pass != nil {
		w.pass()
	}
}
