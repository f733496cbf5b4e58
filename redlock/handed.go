package redlock

import (
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

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
