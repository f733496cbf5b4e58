package model

import (
	"fmt"
	"strings"
	"time"
)

// invariants checks the invariants that read a state (the token
// invariants are checked where a token is committed, in tallyCommit): no
// two leases trusted at once, and no lease trusted beyond its keys. With
// ClockJumps (assumption 1 lifted) neither holds, and neither is checked.
func (m *machine) invariants(s *state) string {
	if m.cfg.ClockJumps {
		return ""
	}
	if bad := m.exclusion(s); bad != "" {
		return bad
	}
	if bad := m.keys(s); bad != "" && !m.cfg.ExclusionOnly {
		return bad
	}
	if m.cfg.Live {
		if bad := m.liveness(s); bad != "" {
			return bad
		}
	}
	if m.cfg.LiveReconfig {
		return m.reconfigLiveness(s)
	}
	return ""
}

// keys is "a lease never outlives the keys that justify it": while a
// client trusts a lease, a majority of the nodes still hold its value,
// unexpired on their clocks, except nodes that lost their data since
// its attempt began (the restart quarantine answers for those: Theorem 3).
func (m *machine) keys(s *state) string {
	n := m.cfg.Nodes
	for c, cl := range s.clients {
		if cl.phase != holding || time.Duration(s.clientNow(n, c))*Unit >= cl.deadline {
			continue
		}
		v := value(c, cl.attempt)
		held := cl.wiped
		for i := 0; i < n; i++ {
			// Not keyspace.live, which deletes an expired key: states
			// share key spaces.
			if e := s.nodes[i][lockKey]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) && e.kind == 's' && e.str == v {
				held |= 1 << i
			}
		}
		if count(held) < m.qc[c] {
			return fmt.Sprintf("a lease outlives its keys at real time %d: client %d trusts %s until %v on its clock, which reads %d, but only %d nodes hold it",
				s.T, c, v, cl.deadline, s.clientNow(n, c), count(held))
		}
	}
	return ""
}

// exclusion is the mutual-exclusion invariant: no two clients trust a
// lease at the same model time (each by its own clock: a holder trusts
// its lease while its clock is before the deadline), and no lease is
// trusted again after another one was trusted while it had lapsed: its
// holder would see one stretch of trust across the other holder's (a
// lease that lapsed and is trusted again is what an extend that
// re-creates keys could bring about). It notes on s which lapsed leases
// another one overtook.
func (m *machine) exclusion(s *state) string {
	var who []string
	trusts := make([]bool, len(s.clients))
	for c, cl := range s.clients {
		if cl.phase == holding && time.Duration(s.clientNow(m.cfg.Nodes, c))*Unit < cl.deadline {
			trusts[c] = true
			who = append(who, fmt.Sprintf("client %d (%s, until %v on its clock, which reads %d)", c,
				value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c)))
		}
	}
	if len(who) > 1 {
		return fmt.Sprintf("double grant at real time %d: %s", s.T, strings.Join(who, " and "))
	}
	for c := range s.clients {
		cl := &s.clients[c]
		if trusts[c] && cl.overtaken {
			return fmt.Sprintf("double grant across a lapse at real time %d: client %d trusts %s again (until %v on its clock, which reads %d), after another lease was trusted while it had lapsed",
				s.T, c, value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c))
		}
		if cl.phase == holding && !trusts[c] && len(who) > 0 {
			cl.overtaken = true
		}
	}
	return ""
}
