package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// One server listed twice under two names (a host name and its IP, two
// addresses of one proxy) would count as two votes: the acquire script
// answers a repeated SET of our own value as granted, so one attempt gets
// two grants from one server, and a client gets a lease that another
// client validly holds. So an entry of the node list votes only once it is
// verified: proven to reach another server than every verified entry. Its
// replies count for nothing until then (docs/protocol.md, "One server, one
// vote").
//
// A proof is one round of the ident script on every entry: each server
// keeps a random id (script.IdentKey) that every name of it reads alike, so two
// entries that answer the same round with the same id are one server, and
// the client is refused for good (*DuplicateNodeError). An entry that
// answers with an id no other entry read is verified, but only if every
// entry verified before answered the same round: a verified entry that did
// not answer may be this one under another name, and when in doubt, the
// entry waits. Proofs are taken one at a time, so two unverified names of
// one server can never both be verified against a set that lacks the other.
// New verifies every entry that answers its probe; an entry that did not
// is verified when it first answers a script call, before its vote counts.
//
// A name can change its server after its proof: a proxy or a DNS name is
// re-pointed, go-redis reconnects, and the entry reaches a server another
// entry reaches too. So the entry is verified with the id it read, and
// every reply that counts (a grant, a renewal, a fence commit, a hand-off)
// carries the id of the server that sent it, read by the same script
// (script.SameServer): a reply from another server, or from one that lost
// its data and has no id, counts for nothing and un-verifies the entry
// (moved), whose next proof finds the duplicate or verifies it anew. A
// round compares every reply with one reading of the proven ids (proven),
// which are pairwise distinct.
//
// Rejected: comparing INFO's run_id (it needs INFO, which ACLs often deny,
// and changes on every restart, so a comparison with an earlier reading
// proves nothing), only New's probe (an entry down at start was never
// checked: the double grant above), and a proof of each entry once (a
// re-pointed name counted its new server twice: an extra GET in each
// script costs no round trip, a proof before every attempt would).
type identity struct {
	mu   sync.Mutex // one proof at a time
	last time.Time  // when the last proof that verified nothing ended; guarded by mu
	// ids holds, per entry, the id the entry was verified with ("": not
	// verified). It is replaced whole, never written in place, so that a
	// round reads every entry's id at one moment (proven).
	ids     atomic.Pointer[[]string]
	dup     atomic.Pointer[DuplicateNodeError]
	proving atomic.Bool // a background proof (proveSoon) is under way
}

// proofEvery is how often a proof that verified nothing (a verified entry
// did not answer) is tried again: each waits for every entry, and a failed
// attempt that met an unverified entry asks for one.
const proofEvery = time.Second

func newIdentity(n int) *identity {
	id := &identity{}
	ids := make([]string, n)
	id.ids.Store(&ids)
	return id
}

// proven returns the id each entry was verified with ("" for none), as of
// one moment: a round counts its replies against one such reading. The
// slice is shared: read it, never write it.
func (id *identity) proven() []string { return *id.ids.Load() }

// verified reports whether node i's replies count as votes (when they come
// from the server it was verified on).
func (c *Client) verified(i int) bool { return c.ident.proven()[i] != "" }

// allVerified reports whether every node is verified.
func (id *identity) allVerified() bool {
	for _, v := range id.proven() {
		if v == "" {
			return false
		}
	}
	return true
}

// unverify takes node i's verification away if it is still the one with
// id was, and reports whether it did.
func (id *identity) unverify(i int, was string) bool {
	for {
		p := id.ids.Load()
		if was == "" || (*p)[i] != was {
			return false
		}
		q := slices.Clone(*p)
		q[i] = ""
		if id.ids.CompareAndSwap(p, &q) {
			return true
		}
	}
}

// moved checks a reply of node i that carries server, the id of the
// server that sent it, against proven, the ids its round counts with: a
// verified entry whose reply comes from another server (re-pointed), or
// from one with no id (it lost its data), is verified no longer. It
// reports whether that is so; the caller counts nothing of the reply and
// asks for a proof.
func (c *Client) moved(proven []string, i int, server string) bool {
	was := proven[i]
	if was == "" || script.SameServer(was, server) {
		return false
	}
	if c.ident.unverify(i, was) {
		c.inst.identityChange(c.nodes[i].name)
		why := "it reaches another server than the one it was verified on (a re-pointed proxy or DNS name)"
		if server == "" {
			why = "its server has no identity: it lost its data, or the name now reaches a new server"
		}
		c.cfg.logger.Warn("redlock: node's replies no longer count until its identity is proven again: "+why,
			"node", i, "addr", c.nodes[i].name)
	}
	return true
}

// verify runs one proof round over every node, within ctx. It returns a
// *DuplicateNodeError when two entries are one server (now or before), and
// reports whether it verified any node.
func (c *Client) verify(ctx context.Context) (bool, error) {
	id := c.ident
	if e := id.dup.Load(); e != nil {
		return false, e
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if e := id.dup.Load(); e != nil {
		return false, e
	}
	if id.allVerified() || !id.last.IsZero() && time.Since(id.last) < proofEvery {
		return false, nil
	}
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (string, error) {
		return c.nodes[i].sn.Ident(ctx, newValue())
	})
	replies := r.Await(ctx, n, func(quorum.Reply[string]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() })
	ids := make([]string, n)
	for _, rep := range replies {
		if rep.Err == nil {
			ids[rep.Node] = rep.Val
		}
	}
	return c.proveLocked(ids)
}

// proveSoon starts a proof in the background, unless one is under way or
// every entry is verified: an entry answered a won attempt (in time or
// late) before it was verified. Its vote then counts from the next
// attempt on. Waiting for a failed attempt to ask for the proof instead
// cost liveness: by then a verified entry may be down, and a proof waits
// for every verified entry, so a client whose entries were down at New
// got no lock with four of five servers up.
func (c *Client) proveSoon(ttl time.Duration) {
	id := c.ident
	if id.dup.Load() != nil || id.allVerified() || !id.proving.CompareAndSwap(false, true) {
		return
	}
	c.spawn(func() {
		defer id.proving.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.nodeTimeout(ttl))
		defer cancel()
		_, _ = c.verify(ctx) // a duplicate is kept in id.dup; the next call returns it
	})
}

// prove is verify for identities read elsewhere (New's probe reads them
// with INFO): ids[i] is what entry i read in one round, "" if it did not
// answer.
func (c *Client) prove(ids []string) (bool, error) {
	c.ident.mu.Lock()
	defer c.ident.mu.Unlock()
	return c.proveLocked(ids)
}

// proveLocked verifies the entries of one round's ids (the rule is
// script.Prove); c.ident.mu is held.
func (c *Client) proveLocked(ids []string) (bool, error) {
	id := c.ident
	p := script.Prove(ids, id.proven())
	switch {
	case p.Dup:
		e := &DuplicateNodeError{Node: p.First, Addr: c.nodes[p.First].name, Other: p.Second, OtherAddr: c.nodes[p.Second].name}
		id.dup.CompareAndSwap(nil, e)
		c.cfg.logger.Error("redlock: two entries of the node list are one Redis server", errAttr(e))
		return false, id.dup.Load()
	case p.Missed:
		id.last = time.Now()
		return false, nil // a verified entry did not answer: prove nothing new
	}
	if len(p.Verified) == 0 {
		return false, nil
	}
	// Only proofs add ids, one at a time (mu); moved only takes them away,
	// concurrently. An entry it took away stays so unless this round
	// verifies it: the round's ids are pairwise distinct, and every entry
	// verified before answered it, so the ids after it are too.
	for {
		cur := id.ids.Load()
		next := slices.Clone(*cur)
		for _, i := range p.Verified {
			next[i] = ids[i]
		}
		if id.ids.CompareAndSwap(cur, &next) {
			return true, nil
		}
	}
}

var errUnverified = errors.New("not counted yet: the node's identity is being checked against the other entries of the node list")
