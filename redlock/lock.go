package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// TryLock makes one attempt to lock key for ttl: one parallel round to
// every node (two with fencing), returning as soon as a majority granted
// or that became impossible, without waiting for slow nodes, and never
// longer than the node timeout per round whatever the redis clients'
// options. On failure it returns a *NotObtainedError (errors.Is
// ErrNotObtained) with a *NodeError per node that did not grant, and
// releases whatever it took on every node. When nodes are in quarantine
// because they are new, it starts their admission and tries once more if
// that admitted them. A node admitted under other deployment settings
// gives a *ConfigError (ErrConfigMismatch) instead. An empty key, a key in
// quorumlock's namespace (the prefix quorumlock:), a ttl not above its drift or
// above the max ttl, or a closed Client is an error that touches no node.
// TryLock never joins the key's line on the nodes: a release keeps the
// key for the first Lock call in line for a short while (or hands it to
// that call, see WithKeyHandOff), and TryLock is refused with ReasonHeld
// meanwhile. A caller that polls with TryLock therefore yields
// to Lock callers and, under steady contention from them, can keep
// losing; use Lock to wait in line. Safe for concurrent use.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	at := c.tryAdmitting(ctx, key, ttl, "", 0)
	return at.lease, at.err
}

// tryAdmitting is one attempt, plus one more right away when nodes that
// refused to vote because they were not admitted could be admitted at once
// (their quarantine was over).
func (c *Client) tryAdmitting(ctx context.Context, key string, ttl time.Duration, waiter string, place int64) outcome {
	at := c.try(ctx, key, ttl, waiter, place)
	if at.err != nil && len(at.unverified) > 0 && ctx.Err() == nil {
		// Nodes answered before their identity was verified, and their
		// votes did not count: verify them now and try again if that
		// verified any (see identity.go).
		vctx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
		more, err := c.verify(vctx)
		cancel()
		if err != nil {
			return outcome{err: err, cleaned: at.cleaned}
		}
		if more {
			// The failed try's cleanup first, or the next try finds the
			// key still held by it on the nodes it reached late.
			if at.cleaned != nil {
				select {
				case <-at.cleaned:
				case <-ctx.Done():
					return at
				}
			}
			next := c.tryAdmitting(ctx, key, ttl, waiter, place)
			next.cleaned = c.bothDone(at.cleaned, next.cleaned)
			return next
		}
	}
	if at.err == nil || len(at.unadmitted) == 0 || ctx.Err() != nil {
		return at
	}
	// The round stopped at its decision, so more nodes than those that
	// answered may be unadmitted: check every node not yet seen admitted.
	actx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
	admitted, left, mismatch := c.admit.admitNow(actx, c.admit.unseen())
	cancel()
	if mismatch != nil {
		return outcome{err: mismatch}
	}
	if !admitted {
		var e *NotObtainedError
		if left > 0 && errors.As(at.err, &e) && e.Reason == ReasonQuarantine {
			e.Wait = left
			e.Detail += fmt.Sprintf("; the next quarantine ends in %v", left.Round(time.Millisecond))
			at.wait = left
		}
		return at
	}
	// Both tries' cleanups put the call back in line where they land: a
	// line-leave or give-back must wait for the first's too.
	second := c.try(ctx, key, ttl, waiter, place)
	second.cleaned = c.bothDone(at.cleaned, second.cleaned)
	return second
}

// Lock locks key for ttl, waiting while someone else holds it: it retries
// after each failed attempt, woken early when the holder releases or its
// key is about to expire, until it obtains the lease, ctx ends (the error
// then wraps both ErrNotObtained and ctx.Err()), the Client is closed
// (ErrClosed), or the WithRetry policy gives up (the last attempt's
// error). Lock calls of one Client on one key queue in memory and only the
// first in line sends attempts; with a WithRetry limit, an attempt that
// finds another Lock of this Client ahead in line counts as a failed
// attempt (ReasonLocal), as a lost race with another process would. Input
// errors and *ConfigError are those of TryLock and end the wait at once.
//
// Waiting Lock calls form a line per key on each node, in the order they
// began; a call keeps its place for as long as it goes on trying, however
// long it waits. A release keeps the free key for the first in line for a
// few round trips and wakes it, and the call takes the key with an attempt
// of its own. With WithKeyHandOff (and without fencing), a release hands the
// key itself to the first in line instead: it sets the key to that call's
// id, with the call's ttl, and tells its Client; the call holds the lock
// once a majority of nodes did so, without a round of its own, and its
// lease counts from before its first attempt. Safe for concurrent use.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	start := c.cfg.clock.Now()
	limited := c.cfg.maxAttempts > 0
	// This call's place in the key's line on the nodes: a release wakes
	// the first in line by name instead of every waiter at once. The
	// place is when the call began, the same on every node, so that every
	// node orders the line alike and names the same waiter. The id starts
	// with this Client's, so the notice comes on the Client's own channel.
	place := time.Now().UnixMicro()
	waiter := c.newWaiter(ttl, place)
	var pass func() // this call's place at the head of the key's local line
	defer func() {
		if pass != nil {
			pass()
		}
	}()
	var wake chan int
	var unregister func()
	defer func() {
		if unregister != nil {
			unregister()
		}
	}()
	var last outcome
	// pending is closed once every cleanup of a failed attempt under the
	// current waiter id, and the give-back that made the id, is over: each
	// puts the id in its place in line where it lands, so leaving the line
	// (or giving keys back) must come after all of them.
	var pending <-chan struct{}
	var since time.Time // when the last attempt started
	inLine := false     // an attempt reached the nodes, so the call may be in line there
	defer func() {
		if inLine && last.err != nil {
			c.leaveLine(key, waiter, ttl, pending)
		}
	}()
	// Nodes where a release handed the key to waiter (attempts' replies;
	// the waker counts the notices), and when the first attempt that put
	// waiter in line began: see handedLease.
	handed := make([]bool, len(c.nodes))
	var first time.Time
	var gaveBack time.Time // when the call last gave keys back
	// handedOff returns the lease of the nodes that handed the key to
	// waiter, once they are a majority; when the call holds some of them
	// but no lease, it gives them back (see giveBack) and waits on under a
	// new id, so that nodes handed to different waiters cannot keep each
	// other from a majority until the keys expire.
	handedOff := func(giveBack bool) *Lease {
		n := c.wake.handedTo(key, waiter, handed)
		if n >= c.quorum {
			if l := c.handedLease(key, ttl, waiter, first); l != nil {
				return l
			}
			giveBack = true // the validity is used up: so are the keys
		}
		if n > 0 && giveBack {
			if c.isClosed() {
				// The call ends (ErrClosed): no new id to wait on. Lock's
				// line-leave under this id deletes the keys that hold it
				// (leaveLine), so the next in line gets them now and not
				// once they expire.
				return nil
			}
			// The new id takes the old one's place on every node in the
			// same step as the give-back (release.lua), so it is in line
			// before anything handed back is handed on, and it listens
			// before that step is sent.
			old := waiter
			first = c.cfg.clock.Now() // before the id exists: see handedLease
			waiter = c.newWaiter(ttl, place)
			clear(handed)
			if unregister != nil {
				unregister()
				wake, unregister, _ = c.wake.register(key, waiter, time.Now())
			}
			// The give-back puts the new id in line where it lands: the
			// new id's line-leave, or its lease's Release, comes after it.
			pending = c.giveBack(key, old, waiter, place, ttl, pending)
			gaveBack = time.Now()
		}
		return nil
	}
	won := func(l *Lease) (*Lease, error) {
		if c.handoffs {
			l.leaveAfter(waiter, pending)
		}
		l.holdGate(pass)
		pass = nil
		c.inst.waitTime.Record(context.Background(), c.cfg.clock.Now().Sub(start).Seconds())
		return l, nil
	}
	for n := 0; ; n++ {
		if pass == nil {
			limit := waitForever
			if limited {
				limit = 0
			}
			p, err := c.gates.enter(ctx, key, c.closing, limit)
			if err != nil {
				return nil, c.stopped(key, last.err, err)
			}
			pass = p
		}
		if pass != nil {
			since = time.Now()
			if wake != nil {
				c.wake.attempting(wake)
			}
			if first.IsZero() {
				first = c.cfg.clock.Now()
			}
			last = c.tryAdmitting(ctx, key, ttl, waiter, place)
			inLine = true
			if last.err == nil {
				return won(last.lease)
			}
			pending = c.bothDone(pending, last.cleaned)
			if errors.Is(last.err, ErrConfigMismatch) || errors.Is(last.err, ErrClosed) {
				return nil, last.err
			}
			for _, i := range last.handed {
				handed[i] = true
			}
			// Give the handed keys back when a call ahead in line holds
			// a handed key too: releases split the nodes between them,
			// and the call ahead must get this call's keys, not wait with
			// it until they expire (see giveBack). At most once per retry
			// delay, though: where nobody else is in line (the call ahead
			// holds its keys but is not in line here, say its process
			// died after releases handed it a majority), the give-back
			// hands the keys straight back to this call's new id and
			// tells it, which wakes it for another attempt, another -6
			// and another give-back, one round every few ms for as long
			// as the call ahead holds its keys.
			ahead := last.ahead && (gaveBack.IsZero() || time.Since(gaveBack) >= c.cfg.retry(n))
			if l := handedOff(ahead); l != nil {
				last = outcome{lease: l}
				return won(l)
			}
			if ctx.Err() != nil {
				return nil, c.stopped(key, last.err, ctx.Err())
			}
		} else {
			last = outcome{err: &NotObtainedError{Key: key, Reason: ReasonLocal, Needed: c.quorum, Nodes: len(c.nodes),
				Detail: "another Lock call of this Client is ahead in line for the key"}}
		}
		if limited && n+1 >= c.cfg.maxAttempts {
			return nil, last.err
		}
		if c.isClosed() {
			return nil, c.stopped(key, last.err, ErrClosed)
		}
		delay := c.cfg.retry(n)
		if last.wait > 0 && last.wait < delay {
			delay = last.wait
		}
		if pass == nil {
			// In line behind another Lock of this Client: wait for the
			// gate, at most as long as the retry policy would sleep.
			p, err := c.gates.enter(ctx, key, c.closing, delay)
			if err != nil {
				return nil, c.stopped(key, last.err, err)
			}
			pass = p
			continue
		}
		if wake == nil {
			// Subscribe, then try again at once unless the key's
			// subscription was live before the failed attempt began: a
			// release in between would go unnoticed.
			ch, unreg, live := c.wake.register(key, waiter, since)
			wake, unregister = ch, unreg
			if !live {
				if c.handoffs {
					// A release may hand this call the key and tell it
					// only by notice: wait until a majority listens (at
					// most the cleanup timeout), so that none after the
					// retry goes unheard.
					t := time.NewTimer(c.cfg.cleanup)
					select {
					case <-c.wake.subscribed(key):
					case <-t.C:
					case <-ctx.Done():
					case <-c.closing:
					}
					t.Stop()
				}
				continue
			}
		}
		if err := c.sleep(ctx, delay, wake, last.took); err != nil {
			return nil, c.stopped(key, last.err, err)
		}
		if l := handedOff(false); l != nil {
			last = outcome{lease: l}
			return won(l)
		}
	}
}

// newWaiter returns a fresh id for a Lock call in a key's line: it starts
// with this Client's id, so that a release's notice comes on the Client's
// own channel, and, without fencing, ends in '~<place>+<ttl ms>': a
// release may then hand the key itself to the call (see handedLease), and
// other calls tell from the place whether it is ahead of them in line.
func (c *Client) newWaiter(ttl time.Duration, place int64) string {
	id := script.WaiterID{Client: c.wake.id, Nonce: newValue()}
	if c.handoffs {
		id.Place, id.TTL = place, ttl
	}
	return id.String()
}

// sleep waits before Lock's next attempt: delay, or until a release wakes
// it. A release names the first waiter in the key's line, which tries at
// once (a waiter named second, by an older client's release that names
// two, tries one to two round trips (took) later, in case the first is
// gone). A release that names nobody (no line, or a release by this
// Client) wakes every waiter, and trying all at once would split the nodes
// between them so that nobody wins a majority, so each waits a random part
// of one round trip first.
func (c *Client) sleep(ctx context.Context, delay time.Duration, wake <-chan int, took time.Duration) error {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case pos := <-wake:
		if pos == wakeHanded {
			return nil
		}
		if pos == wakePart {
			// Some nodes handed the key to this call: the others'
			// releases are on their way. Wait up to two round trips for
			// a majority before trying (see Lock's handedOff).
			j := time.NewTimer(max(2*took, 2*time.Millisecond))
			defer j.Stop()
			for {
				select {
				case p := <-wake:
					if p == wakePart {
						continue
					}
				case <-j.C:
				case <-ctx.Done():
				case <-c.closing:
				}
				break
			}
			break
		}
		var jitter time.Duration
		switch {
		case took <= 0 || pos == wakeFirst:
		case pos == wakeSecond:
			jitter = took + rand.N(took) // the first has had its round trip
		default:
			jitter = rand.N(took)
		}
		if jitter > 0 {
			j := time.NewTimer(jitter)
			defer j.Stop()
			select {
			case <-j.C:
			case <-ctx.Done():
			case <-c.closing:
			}
		}
	case <-t.C:
	case <-ctx.Done():
	case <-c.closing:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c.isClosed() {
		return ErrClosed
	}
	return nil
}

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
// least (docs/fencing.md, "Hand-off inside the release"). nil: the
// validity is used up, or the Client is closing.
//
// A call that waited most of its ttl gets a lease with little validity
// left. Lock returns it as it is, without an extend first: its Deadline
// says how long it is valid, as for a lease whose attempt took long; an
// extend would cost every such hand-off a round, could fail and would
// then have to give the keys back; and a caller that wants a longer
// lease extends it, as Do's renewal does, which schedules the first
// renewal by the remaining validity (see nextRenewal).
func (c *Client) handedLease(key string, ttl time.Duration, waiter string, first time.Time) *Lease {
	if drift.Validity(ttl, c.cfg.clock.Now().Sub(first), c.cfg.factor) <= 0 {
		return nil
	}
	a := c.newAttempt(key, ttl, waiter, 0)
	// No tombstone on release: no acquire of ours can still be on its way
	// with this value, since no attempt sends a waiter id as its value.
	a.value, a.t0 = waiter, first
	a.rel.Value, a.rel.Tomb = waiter, 0
	return c.newLease(a)
}

// stopped is Lock's error when it stops waiting because of why (ctx's
// error or ErrClosed), keeping the last attempt's error.
func (c *Client) stopped(key string, last, why error) error {
	if errors.Is(why, ErrClosed) {
		if last == nil {
			return ErrClosed
		}
		return errors.Join(ErrClosed, last)
	}
	var e *NotObtainedError
	if errors.As(last, &e) {
		if !errors.Is(e, why) {
			e.Errs = append([]error{why}, e.Errs...)
		}
		e.Reason, e.Detail = ReasonCancelled, "gave up waiting: "+e.Detail
		return e
	}
	return &NotObtainedError{Key: key, Reason: ReasonCancelled, Needed: c.quorum, Nodes: len(c.nodes),
		Detail: "gave up waiting before any attempt", Errs: []error{why}}
}

// leaveLine takes a Lock call that gave up out of the key's line on every
// node, in the background, so that releases stop naming it before the
// nodes forget it by themselves (lineMs). It is the release script with a
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
	return c.everyNode(key, after, c.boxes.Release(script.ReleaseArgs{Key: key, Value: newValue(), Waiter: waiter,
		Window: c.handoffWindow(ttl), Line: c.line}))
}

// giveBack is leaveLine for a Lock call that goes on waiting under a new
// id (next, at place): it gives back the keys releases handed to old and
// takes old's place under next, in one step per node.
// Like leaveLine, it goes out after Close too. The returned channel is
// closed once its calls are over: next's line-leave must come after them,
// or a give-back that lands late would put next back in line.
func (c *Client) giveBack(key, old, next string, place int64, ttl time.Duration, after <-chan struct{}) <-chan struct{} {
	return c.everyNode(key, after, c.boxes.Release(script.ReleaseArgs{Key: key, Value: newValue(), Waiter: old,
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
// background, bounded by the cleanup timeout, once after is closed (nil:
// at once): the last failed attempt's cleanup puts the call back in its
// place where it reaches a node, and p must come after it there. The
// returned channel is closed once p's calls are over.
func (c *Client) everyNode(key string, after <-chan struct{}, p *script.Release) <-chan struct{} {
	done := make(chan struct{})
	c.spawn(func() {
		defer close(done)
		if after != nil {
			<-after // bounded: the cleanup has its own timeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
		defer cancel()
		var wg sync.WaitGroup
		for i := range c.nodes {
			wg.Go(func() {
				if _, err := c.releaseOn(ctx, i, p); err != nil {
					c.cfg.logger.Debug("redlock: leaving a key's line failed", "key", key, "node", i, "err", err)
				}
			})
		}
		wg.Wait()
	})
	return done
}
