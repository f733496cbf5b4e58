package model

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// liveness is the bounded liveness check: in a state where no client
// holds a lease or has an attempt out, no acquire call is on the wire
// and every node is admitted, a client with an attempt left gets a lease
// with no fault injected: time passes (every clock at real time's rate)
// until no node holds the key, at most max ttl + 1 ticks, then its
// attempt alone runs on every node in turn, each reply heard at once,
// and its commit round likewise. The bound is k = that wait + 1 + 2n
// steps; a key no lease can still justify that outlives the wait, or an
// attempt that fails, breaks it.
func (m *machine) liveness(s *state) string {
	idler := -1
	for c, cl := range s.clients {
		switch cl.phase {
		case acquiring, committing, holding:
			return ""
		case idle:
			// A LockAll's parts: setLiveness.
			if cl.attempt < m.cfg.Clients[c].Attempts && idler < 0 && m.setOf[c] < 0 {
				idler = c
			}
		}
	}
	if idler < 0 {
		return ""
	}
	for _, q := range s.msgs {
		if !q.reply && q.req.Script == "acquire" {
			return ""
		}
	}
	for e := 0; e < m.size[idler]; e++ {
		mk := s.nodes[m.serverOf(idler, e)][script.MarkerKey]
		if mk == nil || mk.str != m.sigma[idler] {
			return ""
		}
	}
	t := s.clone()
	t.msgs = nil
	wait := 0
	maxTTL := 0
	for _, cc := range m.cfg.Clients {
		maxTTL = max(maxTTL, int(cc.MaxTTL/Unit))
	}
	for {
		held := false
		for i := range t.nodes {
			if e := t.nodes[i][m.key[idler]]; e != nil && (e.exp == 0 || t.nodeNow(i) < e.exp) {
				held = true
			}
		}
		if !held {
			break
		}
		if wait > maxTTL {
			return fmt.Sprintf("liveness: at real time %d no client holds a lease, yet a node still holds the key %d ticks later", s.T, wait)
		}
		t.T++
		wait++
	}
	c := idler
	var start *state
	m.clientSteps(t, c, func(st step) {
		if start == nil && st.next.clients[c].phase == acquiring {
			start = st.next
		}
	})
	if start == nil {
		return fmt.Sprintf("liveness: client %d cannot start an attempt", c)
	}
	t = start
	for round := 0; round < 2 && t.clients[c].phase != holding; round++ {
		for i := 0; i < m.size[c] && t.clients[c].phase != holding; i++ {
			for k, q := range t.msgs {
				if q.reply || q.client != c || q.node != i || q.attempt != t.clients[c].attempt {
					continue
				}
				srv := m.serverIn(t, q)
				ks := t.nodes[srv].clone()
				res := m.exec(ks, t.nodeNow(srv), q.req)
				t.nodes[srv] = ks
				t.msgs = append(t.msgs[:k:k], t.msgs[k+1:]...)
				if m.reads(t, q, res) {
					m.deliver(t, newMsg(msg2reply(q, res)))
				}
				break
			}
		}
	}
	if t.clients[c].phase != holding {
		return fmt.Sprintf("liveness: at real time %d the key is free, yet client %d's attempt alone, with no fault, got no lease (it is %v)", s.T+wait, c, t.clients[c].phase)
	}
	return ""
}

// reconfigLiveness is the bounded liveness of a reconfiguration
// (Config.LiveReconfig): in a state where the operator's last run
// returned nil (every node did its step, or nothing to change), no run is
// under way and no client trusts a lease or has an attempt out, the run's
// client of the new settings gets a lease alone, with no fault: each
// tick, up to its hold-off plus the largest max ttl plus two ticks, it
// tries a lock, checks every entry it found not admitted (each call run
// at once, every reply heard), and tries again. A run that returns nil
// and leaves the new settings unable to lock breaks it. So does a run
// that reads the old settings and is refused while no node has lost its
// data: the scenarios that check liveness run one change, whose records
// a rerun must be able to read, or the change can only be finished by
// typing the old settings.
func (m *machine) reconfigLiveness(s *state) string {
	r := s.reconf
	if r.phase == rIdle && r.last == runRefused && m.cfg.Reconfigs[r.run].ReadFrom && s.wipes == 0 {
		return fmt.Sprintf("liveness: Reconfigure run %d read the old settings from nodes that lost no data and was refused: a run that reads them cannot finish the change", r.runs)
	}
	if r.phase != rIdle || (r.last != runDone && r.last != runNothing) {
		return ""
	}
	for k, cl := range s.clients {
		trusted := cl.phase == holding && time.Duration(s.clientNow(m.cfg.Nodes, k))*Unit < cl.deadline
		if cl.phase == acquiring || cl.phase == committing || trusted {
			return ""
		}
	}
	c := m.cfg.Reconfigs[r.run].To
	if s.ident[c].dup {
		return ""
	}
	_, _, h := m.fromTo(r.run, r.read)
	wait := int(h / Unit)
	for _, cc := range m.cfg.Clients {
		wait += int(cc.MaxTTL/Unit) + 2
	}
	t := s.clone()
	t.msgs = nil
	// The calls dropped are lost: the client's checks in progress time
	// out, as admission.go's loops do, and start again.
	t.clients[c].admitting = 0
	t.clients[c].adm.conf = [maxNodes]conf{}
	m.solo = true
	defer func() { m.solo = false }()
	for k := 0; k <= wait; k++ {
		if m.soloAttempt(t, c) {
			return ""
		}
		for i := 0; i < m.size[c]; i++ {
			if m.check(t, c, i) {
				m.quiesce(t, c)
			}
		}
		if m.soloAttempt(t, c) {
			return ""
		}
		t.T++
	}
	what := map[runResult]string{runDone: "every node did its step", runNothing: "nothing to change"}[r.last]
	return fmt.Sprintf("liveness: Reconfigure run %d returned nil (%s) and client %d of the new settings, alone with no fault from real time %d, has no lease %d ticks later",
		r.runs, what, c, s.T, wait)
}

// soloAttempt runs one attempt of client c alone on t, every call at
// once, and reports whether it got a lease.
func (m *machine) soloAttempt(t *state, c int) bool {
	if t.clients[c].phase == done {
		t.clients[c].phase = idle
	}
	if t.clients[c].phase != idle {
		return t.clients[c].phase == holding
	}
	m.startAttempt(t, c)
	m.quiesce(t, c)
	return t.clients[c].phase == holding
}

// quiesce runs client c's calls on the wire, and those they lead to, each
// reply heard at once.
func (m *machine) quiesce(t *state, c int) {
	for {
		k := -1
		for j, q := range t.msgs {
			if !q.reply && q.client == c {
				k = j
				break
			}
		}
		if k < 0 {
			return
		}
		q := t.msgs[k]
		t.msgs = append(t.msgs[:k:k], t.msgs[k+1:]...)
		srv := m.serverIn(t, q)
		ks := t.nodes[srv].clone()
		res := m.exec(ks, t.nodeNow(srv), q.req)
		t.nodes[srv] = ks
		if m.reads(t, q, res) {
			m.deliver(t, newMsg(msg2reply(q, res)))
		}
	}
}
