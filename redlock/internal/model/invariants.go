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
		if bad := m.setLiveness(s); bad != "" {
			return bad
		}
	}
	if m.cfg.CheckLeftovers {
		if bad := m.leftovers(s); bad != "" {
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
		if cl.phase != holding {
			continue
		}
		own := time.Duration(s.clientNow(n, c))*Unit < cl.deadline
		if !own && !m.setTrusted(s, c) {
			continue
		}
		v := value(c, cl.attempt)
		held := cl.wiped
		for i := 0; i < n; i++ {
			// Not keyspace.live, which deletes an expired key: states
			// share key spaces.
			if e := s.nodes[i][m.key[c]]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) && e.kind == 's' && e.str == v {
				held |= 1 << i
			}
		}
		if count(held) < m.qc[c] {
			if !own {
				k := m.setOf[c]
				d, _ := m.setDeadline(s, k)
				return fmt.Sprintf("a set outlives its keys at real time %d: LockAll %d trusts its set %s until %v on its clock, which reads %d, but only %d nodes hold its key %s (%s)",
					s.T, k, m.setNames(k), d, s.clientNow(n, c), count(held), m.key[c], v)
			}
			return fmt.Sprintf("a lease outlives its keys at real time %d: client %d trusts %s until %v on its clock, which reads %d, but only %d nodes hold it%s",
				s.T, c, v, cl.deadline, s.clientNow(n, c), count(held), m.partNote(c))
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
	trusts := make([]bool, len(s.clients))
	for c := range s.clients {
		trusts[c] = m.believes(s, c)
	}
	// Per key: a LockAll's part believes it holds its key while its own
	// lease or its set is trusted (multikey.go); every other client locks
	// lockKey.
	for _, key := range m.keyList {
		var who []string
		for c, cl := range s.clients {
			if !trusts[c] || m.key[c] != key {
				continue
			}
			if m.trusted(s, c) {
				who = append(who, fmt.Sprintf("client %d (%s, until %v on its clock, which reads %d)%s", c,
					value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c), m.partNote(c)))
				continue
			}
			d, _ := m.setDeadline(s, m.setOf[c])
			who = append(who, fmt.Sprintf("client %d (%s, its own deadline %v passed, in LockAll %d's set %s trusted until %v on its clock, which reads %d)", c,
				value(c, cl.attempt), cl.deadline, m.setOf[c], m.setNames(m.setOf[c]), d, s.clientNow(m.cfg.Nodes, c)))
		}
		if len(who) > 1 {
			of := ""
			if key != lockKey {
				of = " of key " + key
			}
			return fmt.Sprintf("double grant%s at real time %d: %s", of, s.T, strings.Join(who, " and "))
		}
		for c := range s.clients {
			cl := &s.clients[c]
			if m.key[c] != key {
				continue
			}
			if trusts[c] && cl.overtaken {
				return fmt.Sprintf("double grant across a lapse at real time %d: client %d trusts %s again (until %v on its clock, which reads %d), after another lease was trusted while it had lapsed",
					s.T, c, value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c))
			}
			if cl.phase == holding && !trusts[c] && len(who) > 0 {
				cl.overtaken = true
			}
		}
	}
	return ""
}
