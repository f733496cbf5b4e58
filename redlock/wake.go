package redlock

import (
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// waker wakes Lock's waiters when a holder releases, so a hand-off costs
// about one round trip instead of a poll interval. Releases by this Client
// wake local waiters directly; releases by other processes reach them
// through Pub/Sub. The waker keeps one subscriber connection per node,
// subscribed to this Client's own channel and to the channels of the keys
// that have waiters. A release that names the first waiter in the key's
// line sends its notice to that waiter's Client only, on its own channel
// (a waiter id starts with its Client's id); one that names nobody, or
// names a waiter of an older client, publishes on the key's channel.
//
// A missed message only costs a poll: waiters also retry on the retry
// policy's delay, so Pub/Sub is an optimisation, never needed for safety or
// progress.
type waker struct {
	c       *Client
	mu      sync.Mutex
	waiters map[string]*keyWaiters
	subs    []*subscriber // per node, nil until first needed
	idle    int           // keys subscribed with no waiter, kept for a while
	closed  bool
	// id is this Client's part of its waiters' ids: a release sends the
	// notice that names them to script.WakeChannel(id) only, so the Clients it does
	// not name (and every other waiter of the key) are not woken to read
	// it (see release.lua).
	id string
}

// keyWaiters is one key's subscription and its waiters. A key whose last
// waiter left stays subscribed for linger, so that a key contended again
// and again costs no SUBSCRIBE and UNSUBSCRIBE per Lock call.
type keyWaiters struct {
	set       map[string]chan int // waiter id -> channel
	acked     int                 // nodes that confirmed the SUBSCRIBE
	liveSince time.Time           // when a majority had confirmed it
	lastAt    time.Time           // when the last release notice arrived
	lastNames string              // and whom it named
	linger    *time.Timer         // set while the key has no waiter
	handed    map[string][]string // waiter id -> per node, the id of the server that handed it the key ("" none)
	ready     chan struct{}       // closed once a majority of nodes confirmed the subscription
}

const (
	linger   = 2 * time.Second // how long a key with no waiter stays subscribed
	maxIdle  = 1024            // keys kept subscribed with no waiter, at most
	maxEarly = 64              // a key's hand-off records for ids not registered, at most
)

// Positions a wake-up carries: first in the key's line, second (only
// releases by older clients name two), or anyone (a release that named
// nobody, or a local one).
const (
	wakeFirst  = 0
	wakeSecond = 1
	wakeAnyone = 2
	wakeHanded = 3 // a majority of nodes handed the key to the waiter
	wakePart   = 4 // some nodes handed the key to the waiter, fewer than a majority
)

func newWaker(c *Client) *waker {
	return &waker{c: c, waiters: map[string]*keyWaiters{}, subs: make([]*subscriber, len(c.nodes)), id: newValue()[:12]}
}

// register adds waiter id for key, whose last attempt started at since.
// The returned channel receives the waiter's position when the key may
// have been released; unregister must be called when the waiter stops
// waiting. live reports that the key's subscription was confirmed by a
// majority of nodes before since: then no release after since can go
// unheard (one that arrived before the waiter registered is delivered
// now), and the waiter need not try again before it sleeps.
func (w *waker) register(key, id string, since time.Time) (ch chan int, unregister func(), live bool) {
	ch = make(chan int, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ch, func() {}, false
	}
	kw := w.waiters[key]
	if kw == nil {
		kw = &keyWaiters{set: map[string]chan int{}, ready: make(chan struct{})}
		w.waiters[key] = kw
		w.sendLocked(subOp{sub: true, channel: script.ReleaseChannel(key), kw: kw})
	}
	if kw.linger != nil {
		kw.linger.Stop()
		kw.linger = nil
		w.idle--
	}
	kw.set[id] = ch
	live = !kw.liveSince.IsZero() && kw.liveSince.Before(since)
	switch {
	case kw.handed[id] != nil:
		// Releases handed it the key before it registered: that is the
		// one wake-up it gets (ch holds one; a second send here, under
		// w.mu, would block the waker for good). A release notice that
		// came as well adds nothing: the waiter counts the hand-offs and
		// tries again when they are short of a majority.
		w.tellHanded(kw, id, ch)
	case live && kw.lastAt.After(since):
		if pos, ok := position(kw.lastNames, id); ok {
			ch <- pos // ch is new and empty
		}
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(kw.set, id)
		delete(kw.handed, id)
		if len(kw.set) > 0 || w.waiters[key] != kw || w.closed {
			return
		}
		if w.idle < maxIdle {
			w.idle++
			kw.linger = time.AfterFunc(linger, func() { w.forget(key, kw) })
			return
		}
		delete(w.waiters, key)
		w.sendLocked(subOp{sub: false, channel: script.ReleaseChannel(key)})
	}, live
}

// forget unsubscribes a key that had no waiter for linger.
func (w *waker) forget(key string, kw *keyWaiters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.waiters[key] != kw || len(kw.set) > 0 || kw.linger == nil {
		return
	}
	kw.linger = nil
	w.idle--
	delete(w.waiters, key)
	w.sendLocked(subOp{sub: false, channel: script.ReleaseChannel(key)})
}

// position is where a release notice that named names puts waiter id:
// first or second in line, anyone when it named nobody, and ok false when
// it named others only.
func position(names, id string) (pos int, ok bool) {
	if names == "" {
		return wakeAnyone, true
	}
	pos = wakeFirst
	for name := range script.Named(names) {
		if name == id {
			return pos, true
		}
		pos++
	}
	return 0, false
}

// local wakes this Client's waiters for key.
func (w *waker) local(key string) { w.notify(key, "") }

// notify delivers a release of key: to the waiters named in names (space
// separated, first in line first), or to every waiter when it names
// nobody. Names of other Clients' waiters are ignored.
func (w *waker) notify(key, names string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.waiters[key]
	if kw == nil {
		return
	}
	kw.lastAt, kw.lastNames = time.Now(), names
	set := kw.set
	if len(set) == 0 {
		return
	}
	// The newest notice replaces one still unread: it says where the
	// waiter stands now (first, second or anyone).
	send := func(ch chan int, pos int) {
		select {
		case <-ch:
		default:
		}
		ch <- pos
	}
	if names == "" {
		for _, ch := range set {
			send(ch, wakeAnyone)
		}
		return
	}
	pos := wakeFirst
	for name := range script.Named(names) {
		if ch, ok := set[name]; ok {
			send(ch, pos)
		}
		pos++
	}
}

// attempting drains a waiter's wake-up when one of its attempts begins: a
// notice that came before is answered by the attempt, which reaches each
// node after the release that sent it, and waking for it again afterwards
// would only send an attempt to a key that has a new holder by then.
func (w *waker) attempting(ch chan int) {
	w.mu.Lock() // notify replaces under w.mu: no notice is lost between the two
	defer w.mu.Unlock()
	select {
	case <-ch:
	default:
	}
}

// close stops the subscribers and wakes nobody; Lock's waiters notice the
// Client is closed on their next attempt.
func (w *waker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for _, kw := range w.waiters {
		if kw.linger != nil {
			kw.linger.Stop()
		}
	}
	for _, s := range w.subs {
		if s != nil {
			close(s.ops)
			_ = s.ps.Close()
		}
	}
}

// The waker's record of hand-offs: which nodes a release handed a key to
// which waiter id, as their notices tell it, and the id of the server
// each notice came from (identity.go).

// handOff is one node's hand-off of a key to a Lock call, as an attempt's
// reply told it: the node, and the id of the server that sent the reply.
type handOff struct {
	node   int
	server string
}

// handedBy records that node handed key to waiter id (release.lua sets
// the key to the id there; server is the id of the server that said so)
// and tells the waiter: wakeHanded once a majority of nodes did, else
// wakePart. For an id that is not registered
// (its first attempt has not returned yet, or it has stopped waiting) the
// hand-off is only recorded, at most maxEarly ids per key: register tells
// the waiter. An id is never registered again once unregistered (a
// give-back retires it), so a late notice for a retired id counts for
// nothing.
func (w *waker) handedBy(node int, key, id, server string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.waiters[key]
	if kw == nil {
		return
	}
	if node < 0 || node >= len(w.c.nodes) {
		return
	}
	if kw.handed == nil {
		kw.handed = map[string][]string{}
	}
	ch, ok := kw.set[id]
	if !ok && kw.handed[id] == nil && len(kw.handed) >= maxEarly {
		// Hand-offs to ids that never registered (their call won or
		// gave up before it waited): forget them rather than grow.
		for id := range kw.handed {
			if _, ok := kw.set[id]; !ok {
				delete(kw.handed, id)
			}
		}
	}
	by := kw.handed[id]
	if by == nil {
		by = make([]string, len(w.c.nodes))
		kw.handed[id] = by
	}
	// A notice that names no server (one without an id, or an older
	// release script) counts for nothing: see handedTo.
	by[node] = server
	if !ok {
		// Not waiting yet: its first attempt has put it in line and not
		// returned. register tells it.
		return
	}
	w.tellHanded(kw, id, ch)
}

// tellHanded tells waiter id how far the hand-offs it got have come:
// wakeHanded once a majority of nodes handed it the key, else wakePart.
// The newest notice replaces one still unread.
func (w *waker) tellHanded(kw *keyWaiters, id string, ch chan int) {
	n := 0
	proven := w.c.ident.proven()
	for i, server := range kw.handed[id] {
		if script.SameServer(proven[i], server) {
			n++
		}
	}
	pos := wakePart
	if n >= quorum.Majority(len(w.c.nodes)) {
		pos = wakeHanded
	}
	// The newest notice replaces one still unread.
	select {
	case <-ch:
	default:
	}
	ch <- pos
}

// handedTo counts the nodes that handed key to waiter id: those whose
// notice arrived while it was registered, and those marked in also (its
// attempts' replies; the server id of each, "" for none), each only if
// it came from the server its node was verified on, as one reading of
// the proven ids has it (identity.go).
func (w *waker) handedTo(key, id string, also []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var by []string
	if kw := w.waiters[key]; kw != nil {
		by = kw.handed[id]
	}
	proven := w.c.ident.proven()
	n := 0
	for i, server := range also {
		if script.SameServer(proven[i], server) || (i < len(by) && script.SameServer(proven[i], by[i])) {
			n++
		}
	}
	return n
}
