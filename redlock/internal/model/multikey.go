package model

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// One lease over several keys (docs/protocol.md, "One lease over several
// keys"): a LockAll takes its keys one at a time, in sorted byte order
// whatever order they were listed in, each with the ordinary single-key
// attempt (acquire, commit with fencing, extend); it keeps the keys it
// took renewed while it goes for the next, gives up (releasing every key
// it took) when its wait ends or a key it took is lost, and trusts the set
// until the earliest deadline of its keys.
//
// The model runs a LockAll as one client per key, its parts, numbered in
// the order it takes them: each part is an ordinary client of the model
// (its attempts, commit, extends, identity and admission are the
// single-key steps), and the LockAll adds the rules that tie them:
// a part starts an attempt only while every part before it holds a
// trusted lease and no part after it has started (mayStart); the LockAll
// gives up (setSteps) when its current key's attempts are used up, a key
// it took lapsed or was lost, or at any moment (its ctx, WaitAtMost)
// unless NoGiveUps; a complete set is released as one step. Attempts
// bound the tries per key: LockAll waits without bound, and
// setLiveness asks whether waiting could ever end.

// checkKeys refuses a LockAll the model cannot run: fewer than two keys,
// an empty key or one listed twice (the input errors, which touch no
// node), or client clocks that run ahead (the parts of a LockAll share
// one clock, and the model keeps one per client).
func (cc ClientConfig) checkKeys(cfg *Config) error {
	if cc.Keys == nil {
		return nil
	}
	if cc.Key != "" {
		return errors.New("a LockAll with a Key of its own")
	}
	if len(cc.Keys) < 2 {
		return errors.New("a LockAll over fewer than two keys")
	}
	seen := map[string]bool{}
	for _, k := range cc.Keys {
		if k == "" || seen[k] {
			return fmt.Errorf("LockAll keys %q: an empty key or one listed twice", cc.Keys)
		}
		seen[k] = true
	}
	if cfg.ClientSkew > 0 {
		return errors.New("a LockAll with client clocks that run ahead (its parts share one clock)")
	}
	return nil
}

// expandSets replaces each LockAll of cfg.Clients with its parts, in the
// order it takes its keys: sorted byte order, or the listing order with
// NoCanonicalOrder. A configuration without LockAll is returned as it is.
func expandSets(cfg Config) Config {
	has := false
	for _, cc := range cfg.Clients {
		has = has || cc.Keys != nil
	}
	if !has {
		return cfg
	}
	var out []ClientConfig
	sets := 0
	for _, cc := range cfg.Clients {
		if cc.Keys == nil {
			out = append(out, cc)
			continue
		}
		sets++
		keys := slices.Clone(cc.Keys)
		if !cfg.NoCanonicalOrder {
			slices.Sort(keys)
		}
		for p, k := range keys {
			part := cc
			part.Keys, part.key, part.set, part.pos = nil, k, sets, p
			out = append(out, part)
		}
	}
	cfg.Clients = out
	return cfg
}

// initSets fills the machine's view of the LockAlls from its (expanded)
// clients.
func (m *machine) initSets() {
	for c, cc := range m.cfg.Clients {
		k := cmp.Or(cc.key, cc.Key, lockKey)
		m.key = append(m.key, k)
		m.setOf = append(m.setOf, cc.set-1)
		if !slices.Contains(m.keyList, k) {
			m.keyList = append(m.keyList, k)
		}
		if cc.set == 0 {
			continue
		}
		for len(m.sets) < cc.set {
			m.sets = append(m.sets, nil)
		}
		m.sets[cc.set-1] = append(m.sets[cc.set-1], c)
	}
}

// partNote names client c's LockAll and key in a step's words (for a
// client that locks one key, that key unless it is lockKey).
func (m *machine) partNote(c int) string {
	k := m.setOf[c]
	if k < 0 && m.key[c] != lockKey {
		return " [key " + m.key[c] + "]"
	}
	if k < 0 {
		return ""
	}
	return fmt.Sprintf(" [LockAll %d, key %s, %d of %d]", k, m.key[c], m.cfg.Clients[c].pos+1, len(m.sets[k]))
}

// setNames lists a LockAll's keys in the order it takes them.
func (m *machine) setNames(k int) string {
	var ks []string
	for _, c := range m.sets[k] {
		ks = append(ks, m.key[c])
	}
	return "{" + strings.Join(ks, ", ") + "}"
}

// trusted reports whether client c trusts its own lease: it holds one and
// its clock is before its deadline.
func (m *machine) trusted(s *state, c int) bool {
	cl := &s.clients[c]
	return cl.phase == holding && time.Duration(s.clientNow(m.cfg.Nodes, c))*Unit < cl.deadline
}

// setDeadline is when LockAll k's holder stops trusting its set: the
// earliest deadline of its keys (each moved by that key's extends), or,
// with SetDeadlineFromLast, the deadline of the last key taken. ok is
// false while the set is not complete (some part holds no lease).
func (m *machine) setDeadline(s *state, k int) (d time.Duration, ok bool) {
	parts := m.sets[k]
	for i, c := range parts {
		cl := &s.clients[c]
		if cl.phase != holding || cl.over {
			return 0, false
		}
		if i == 0 || cl.deadline < d {
			d = cl.deadline
		}
	}
	if m.cfg.SetDeadlineFromLast {
		d = s.clients[parts[len(parts)-1]].deadline
	}
	return d, true
}

// setTrusted reports whether client c is a part of a complete set whose
// holder trusts it now.
func (m *machine) setTrusted(s *state, c int) bool {
	k := m.setOf[c]
	if k < 0 {
		return false
	}
	d, ok := m.setDeadline(s, k)
	return ok && time.Duration(s.clientNow(m.cfg.Nodes, c))*Unit < d
}

// believes reports whether client c believes it holds its key: its own
// lease trusted, or, as a part of a LockAll, its set trusted.
func (m *machine) believes(s *state, c int) bool {
	return m.trusted(s, c) || m.setTrusted(s, c)
}

// mayStart reports whether client c may start an attempt as far as its
// LockAll goes: every part before it holds a trusted lease, no part after
// it has started, and the LockAll has not ended.
func (m *machine) mayStart(s *state, c int) bool {
	k := m.setOf[c]
	if k < 0 {
		return true
	}
	if s.clients[c].over {
		return false
	}
	for _, p := range m.sets[k] {
		switch {
		case p == c:
		case m.cfg.Clients[p].pos < m.cfg.Clients[c].pos:
			if !m.trusted(s, p) {
				return false
			}
		case s.clients[p].attempt > 0:
			return false
		}
	}
	return true
}

// current is LockAll k's part that has no lease yet, the first in order
// (-1: every part holds one).
func (m *machine) current(s *state, k int) int {
	for _, c := range m.sets[k] {
		if s.clients[c].phase != holding {
			return c
		}
	}
	return -1
}

// mustGiveUp reports whether LockAll k can no longer go on: its current
// key's attempts are used up, a key it took lapsed, or a key it took was
// lost (its part no longer holds while a later part has started).
func (m *machine) mustGiveUp(s *state, k int) bool {
	cur := m.current(s, k)
	if cur < 0 {
		return false
	}
	if s.clients[cur].phase == done {
		return true
	}
	for _, c := range m.sets[k] {
		pos, cp := m.cfg.Clients[c].pos, m.cfg.Clients[cur].pos
		if (pos < cp && !m.trusted(s, c)) || (pos > cp && s.clients[c].attempt > 0) {
			return true
		}
	}
	return false
}

// setSteps are the steps a LockAll takes as a whole: a complete set is
// released (LeaseSet.Release: every lease, to every node); an incomplete
// one gives up (all or nothing: every key it took is released, and its
// attempt in progress cleaned up), when it must, or at any moment unless
// NoGiveUps. Either ends the LockAll: its parts take no step after.
func (m *machine) setSteps(s *state, emit func(step)) {
	for k, parts := range m.sets {
		if s.clients[parts[0]].over {
			continue
		}
		if _, complete := m.setDeadline(s, k); complete {
			t := s.clone()
			for _, c := range parts {
				m.releaseLease(t, c)
				m.over(t, c)
			}
			emit(step{func() string { return fmt.Sprintf("LockAll %d releases its set %s", k, m.setNames(k)) }, t})
			continue
		}
		forced := m.mustGiveUp(s, k)
		if m.cfg.NoGiveUps && !forced {
			continue
		}
		t := s.clone()
		var took []string
		for _, c := range parts {
			switch t.clients[c].phase {
			case holding:
				took = append(took, m.key[c])
				if !m.cfg.KeepPartialHolds {
					m.releaseLease(t, c)
				}
			case acquiring, committing:
				m.cleanup(t, c)
			}
			m.over(t, c)
		}
		why := "its ctx ends"
		if forced {
			why = "it cannot go on"
		}
		emit(step{func() string {
			rel := "releases the keys it took"
			if m.cfg.KeepPartialHolds {
				rel = "releases nothing"
			}
			return fmt.Sprintf("LockAll %d gives up (%s) holding %v: it %s", k, why, took, rel)
		}, t})
	}
}

// releaseLease sends the release of client c's lease to every node, as
// Lease.Release does.
func (m *machine) releaseLease(t *state, c int) {
	cl := &t.clients[c]
	req := m.release(c, cl.attempt)
	for i := 0; i < m.size[c]; i++ {
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: cl.attempt, req: req}))
	}
}

// over ends client c's part of its LockAll.
func (m *machine) over(t *state, c int) {
	cl := &t.clients[c]
	cl.phase, cl.over, cl.extending = done, true, false
}
