package model

import (
	"fmt"
	"strings"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The checks particular to LockAll: a deadlock between set lockers, and
// values a LockAll that ended left behind.

// setLiveness is the bounded liveness of LockAll, which waits without
// bound for each key while it holds the keys it took: in a state where no
// client has a round out (acquire, commit or extend) or a set complete,
// no acquire is on the wire, every node is admitted, no node holds a key
// of a LockAll but the keys its parts took, and every LockAll that has
// not ended waits for its next key (the keys it took trusted, its current
// part between tries), some LockAll must get its next key with no fault:
// each one's next try alone, every call run at once, every reply heard.
// If none does, none ever will: the keys they wait for are held by
// LockAlls that wait too and keep them renewed, a deadlock. (Keys held by
// nobody are left to the states where they are gone: a key left by a
// failed attempt expires, or its cleanup runs.)
func (m *machine) setLiveness(s *state) string {
	if len(m.sets) == 0 {
		return ""
	}
	for c, cl := range s.clients {
		if cl.phase == acquiring || cl.phase == committing || cl.extending ||
			(m.setOf[c] < 0 && cl.phase == holding) {
			return ""
		}
	}
	for _, q := range s.msgs {
		if !q.reply && q.req.Script == "acquire" {
			return ""
		}
	}
	for c := range s.clients {
		if s.clients[c].over {
			continue
		}
		for e := 0; e < m.size[c]; e++ {
			mk := s.nodes[m.serverOf(c, e)][script.MarkerKey]
			if mk == nil || mk.str != m.sigma[c] {
				return ""
			}
		}
	}
	var waiting []int // the current part of each LockAll that waits
	taken := map[string]bool{}
	for k, parts := range m.sets {
		if s.clients[parts[0]].over {
			continue
		}
		cur := m.current(s, k)
		if cur < 0 || s.clients[cur].phase != idle || m.mustGiveUp(s, k) {
			return ""
		}
		for _, c := range parts {
			if s.clients[c].phase == holding {
				taken[m.key[c]+"="+value(c, s.clients[c].attempt)] = true
			}
		}
		waiting = append(waiting, cur)
	}
	if len(waiting) == 0 {
		return ""
	}
	for i := range s.nodes {
		for _, key := range m.keyList {
			if e := s.nodes[i][key]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) && !taken[key+"="+e.str] {
				return ""
			}
		}
	}
	var held []string
	for _, c := range waiting {
		t := s.clone()
		t.msgs = nil
		m.startAttempt(t, c)
		m.quiesce(t, c)
		if t.clients[c].phase == holding {
			return ""
		}
		k := m.setOf[c]
		var took []string
		for _, p := range m.sets[k] {
			if s.clients[p].phase == holding {
				took = append(took, m.key[p])
			}
		}
		held = append(held, fmt.Sprintf("LockAll %d holds %v and waits for %s", k, took, m.key[c]))
	}
	return fmt.Sprintf("liveness: deadlock at real time %d: %s; each one's next try alone, with no fault, fails, and each keeps what it holds renewed while it waits",
		s.T, strings.Join(held, ", "))
}

// leftovers is Config.CheckLeftovers: a LockAll that ended (it gave up or
// released its set) leaves none of its values on any node once every
// call its parts sent has run. A value left there keeps the key from
// every other client until it expires, although nobody holds it.
func (m *machine) leftovers(s *state) string {
	for c, cl := range s.clients {
		if !cl.over {
			continue
		}
		out := false
		for _, q := range s.msgs {
			out = out || (!q.reply && q.client == c)
		}
		if out {
			continue
		}
		mine := fmt.Sprintf("c%d.", c) // value(c, a) for every attempt a
		for i := range s.nodes {
			if e := s.nodes[i][m.key[c]]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) && strings.HasPrefix(e.str, mine) {
				return fmt.Sprintf("a LockAll leaves a key behind at real time %d: LockAll %d ended and every call of its client %d ran, yet node %d holds its key %s (value %s) until %d ms: no other client can take it until then",
					s.T, m.setOf[c], c, i, m.key[c], e.str, e.exp)
			}
		}
	}
	return ""
}
