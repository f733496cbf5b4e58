package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// extendSteps are a holder's Lease.Extend (extend.go): while it trusts
// its lease, it sends the extend script to every node, with the lease's
// ttl; or it gives up a round in progress (the node timeout), which
// changes nothing.
func (m *machine) extendSteps(s *state, c int, emit func(step)) {
	cl := s.clients[c]
	cc := m.cfg.Clients[c]
	n := m.cfg.Nodes
	now := s.clientNow(n, c)
	if cl.extending {
		t := s.clone()
		t.clients[c].extending = false
		t.clients[c].missed = m.entries(c) &^ (cl.eyes & cl.same)
		emit(step{func() string { return fmt.Sprintf("client %d gives up extend %d (timeout)", c, cl.extends) }, t})
		return
	}
	// Extend refuses to send for a lease past its deadline (l.over()).
	if cl.extends >= cc.Extends || time.Duration(now)*Unit >= cl.deadline {
		return
	}
	// The entries that did not renew the lease last round may re-create
	// its key (none without the quarantine: extendCalls). The client
	// names those whose replies said so once the round's calls were over,
	// which the model does not follow: it names any of them.
	named := cl.missed
	if cc.NoQuarantine || m.cfg.NoRecreate {
		named = 0
	}
	for sub := named; ; sub = (sub - 1) & named {
		m.startExtend(s, c, now, sub, emit)
		if sub == 0 {
			break
		}
	}
}

// startExtend starts client c's next extend round at its clock now,
// naming the entries of named for re-creation.
func (m *machine) startExtend(s *state, c, now int, named uint8, emit func(step)) {
	cl := s.clients[c]
	cc := m.cfg.Clients[c]
	t := s.clone()
	tc := &t.clients[c]
	tc.extending, tc.extends, tc.e0, tc.eyes, tc.egone = true, cl.extends+1, now, 0, 0
	tc.proven, tc.same = s.ident[c].proven, 0
	args := []script.ExtendArgs{{Key: m.key[c], Value: value(c, cl.attempt), TTL: cc.TTL}}
	req := script.NewExtend(args, "").Request()
	args[0].Recreate = true
	rec := script.NewExtend(args, m.sigma[c]).Request()
	for i := 0; i < m.size[c]; i++ {
		r := req
		if named&(1<<i) != 0 {
			r = rec
		}
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: cl.attempt, round: tc.extends, req: r}))
	}
	emit(step{func() string {
		re := ""
		if named != 0 {
			re = fmt.Sprintf(", re-creating on %s", entryList(named))
		}
		return fmt.Sprintf("client %d starts extend %d of %s (ttl %v) at its clock %d: extend to every node%s", c, tc.extends, value(c, cl.attempt), cc.TTL, now, re)
	}, t})
}

// entryList writes a set of entries as "entries 0, 2".
func entryList(set uint8) string {
	var es []string
	for i := 0; i < maxNodes; i++ {
		if set&(1<<i) != 0 {
			es = append(es, fmt.Sprint(i))
		}
	}
	return "entries " + strings.Join(es, ", ")
}

// tallyExtend counts one extend reply as extendRound and applyExtend do:
// a majority of renewals with validity left, counted from the round's
// start, moves the deadline to e0 + ttl - drift if that is later; a
// majority that found the key gone loses the lease (the model then
// releases it, as a caller would).
func (m *machine) tallyExtend(t *state, c int, r msg) string {
	cl := &t.clients[c]
	rep, err := script.ParseExtend(r.res.([]any), 1)
	if err != nil {
		panic(err)
	}
	if rep.Renewed(0) {
		cl.eyes |= 1 << r.node
	} else {
		cl.egone |= 1 << r.node
	}
	return m.same(t, c, r.node, rep.Ident) + m.decideExtend(t, c)
}

// entries is the set of client c's entries.
func (m *machine) entries(c int) uint8 { return uint8(1<<m.size[c] - 1) }

// decideExtend is tallyExtend's decision on the replies heard so far.
func (m *machine) decideExtend(t *state, c int) string {
	cl := &t.clients[c]
	cc := m.cfg.Clients[c]
	n := m.cfg.Nodes
	votes := cl.eyes & cl.same // only from the server an entry was verified on (identity.go)
	switch {
	case count(votes) >= m.qc[c]:
		cl.extending = false
		cl.missed = m.entries(c) &^ votes
		now := t.clientNow(n, c)
		if time.Duration(now)*Unit >= cl.deadline && !m.cfg.NoLapseCheck {
			// Decided after the lease lapsed: it counts for nothing, and
			// the lease is lost (extend.go, applyExtend).
			m.fail(t, c)
			return fmt.Sprintf(" -> extend %d renewed on %d nodes, but after the lease lapsed at %v: it is lost (released)", cl.extends, count(votes), cl.deadline)
		}
		if m.validity(cc, time.Duration(now-cl.e0)*Unit) <= 0 {
			return fmt.Sprintf(" -> extend %d renewed on %d nodes but took its whole validity: the deadline stays", cl.extends, count(cl.eyes))
		}
		if d := m.deadline(cc, cl.e0, now); d > cl.deadline {
			cl.deadline = d
		}
		return fmt.Sprintf(" -> extend %d: client %d holds %s until its clock reads %v", cl.extends, c, value(c, cl.attempt), cl.deadline)
	case m.size[c]-count(cl.egone) < m.qc[c]:
		cl.missed = m.entries(c) &^ votes
		m.fail(t, c)
		return fmt.Sprintf(" -> extend %d: the key is gone on %d nodes: the lease is lost (released)", cl.extends, count(cl.egone))
	case count(cl.eyes|cl.egone) == m.size[c]:
		cl.extending = false
		cl.missed = m.entries(c) &^ votes
		return fmt.Sprintf(" -> extend %d reached too few nodes: the deadline stays", cl.extends)
	}
	return ""
}
