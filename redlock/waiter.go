package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
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

// sleep waits before Lock's next attempt: delay, or until a release wakes
// it. A release names the first waiter in the key's line, which tries at
// once (a waiter named second, by an older client's release that names
// two, tries one to two round trips (took) later, in case the first is
// gone). A release that names nobody (no line, or a release by this
// Client) wakes every waiter, and trying all at once would split the nodes
// between them so that nobody wins a majority, so each waits a random part
// of one round trip first.
func (w *waiter) sleep(ctx context.Context, delay time.Duration) error {
	c, wake, took := w.c, w.wake, w.last.took
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case pos := <-wake:
		if pos == wakeHanded {
			return nil
		}
		if pos == wakePart {
			// Some nodes handed the key to this call: the others'
			// releases are on their way. Wait for a majority before
			// trying (see handedOff), up to two round trips or one node
			// timeout for the call's ttl, whichever is longer. The
			// notices come over separate connections, and on a busy host
			// their gaps outgrow a round trip; an attempt sent meanwhile
			// costs a round on every node and gains nothing: where the
			// release has not landed yet the key is still held, and
			// where it has, the key waits for this call alone.
			j := time.NewTimer(max(2*took, c.nodeTimeout(w.ttl)))
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

// nextDelay is how long Lock waits after its last attempt failed, given
// the retry policy's delay for it.
func (w *waiter) nextDelay(retry time.Duration) time.Duration {
	delay := retry
	switch {
	case w.last.wait > 0 && onlyQuarantine(w.last.err):
		// The quarantine (or hold-off) was all that stood in the way:
		// nothing a node can grant changes before the first one ends, and
		// the attempt after it admits the node. (A node that was down or
		// unverified may come back sooner: then the call keeps trying.)
		delay = w.last.wait
	case w.last.wait > 0 && w.last.wait < delay:
		delay = w.last.wait
	}
	if b := w.backoff(); b > delay {
		delay = b
		if w.last.wait > 0 {
			// The nodes said when what refused the attempt changes (the
			// first quarantine's end): backing off does not carry the
			// next attempt past that moment.
			delay = min(delay, w.last.wait)
		}
	}
	return delay
}

// backoff is the least Lock waits after its last attempt, however short
// its retry policy: 0, unless the attempt was the second or later in a
// row that the lock service could not grant (IsUnavailable: too few nodes
// answered in time, too few admitted, a round too slow for the ttl). Then
// it is backoffBase doubled per such attempt, up to backoffMax, and drawn
// from its upper half. Contention is not slowed: a waiter is woken by the
// holder's release. But when the nodes cannot answer, every attempt of
// every waiting client is five calls that fail, and a host or network
// already too busy to answer in time got them every 20-100 ms: in the
// chaos nemesis on a loaded machine, ten clients whose rounds all ran out
// of time kept each other's calls late for the whole minute and got 1 to
// 4 leases instead of about 160. Backing off lets the calls answer again,
// at the cost of noticing a recovered service up to backoffMax late. It
// also reports the attempt to noticeUnavailable, which says it once per
// episode.
func (w *waiter) backoff() time.Duration {
	if !IsUnavailable(w.last.err) {
		w.down = 0
		return 0
	}
	w.down++
	w.c.noticeUnavailable(w.last.err)
	if w.down < 2 {
		return 0
	}
	d := min(backoffMax, backoffBase<<min(w.down-2, 8))
	return d/2 + rand.N(d/2)
}

// The backoff of Lock's attempts while the lock service cannot grant.
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = time.Second
)

// noticeUnavailable reports a waiting call's attempt that failed because
// the lock service could not grant (err, IsUnavailable) to the log and to
// WithUnavailableNotice's function, once per episode of this Client: the
// episode ends when one of its attempts (TryLock's too) obtains a lease or
// finds the key held, or a release hands it one (serviceAnswered). A
// quarantine has a notice of its own (noticeQuarantine).
func (c *Client) noticeUnavailable(err error) {
	var e *NotObtainedError
	if !errors.As(err, &e) || e.Reason == ReasonQuarantine || !c.unavailableSaid.CompareAndSwap(false, true) {
		return
	}
	c.cfg.logger.Warn("redlock: the lock service cannot grant the lock now; waiting, with attempts backing off up to 1 s apart",
		"key", keyText(e.Key), "reason", string(e.Reason), "detail", e.Detail)
	if c.cfg.onUnavailable != nil {
		// A copy: the call goes on with e, and its final error is built
		// from the last attempt's (see Client.stopped), which f may keep.
		cp := *e
		c.cfg.onUnavailable(&cp)
	}
}

// serviceAnswered ends the current unavailability episode (see
// noticeUnavailable).
func (c *Client) serviceAnswered() {
	if c.unavailableSaid.Load() {
		c.unavailableSaid.Store(false)
	}
}
