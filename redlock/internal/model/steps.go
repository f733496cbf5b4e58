package model

import (
	"fmt"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// step is one transition, with what it did in words.
type step struct {
	text func() string // only called to print a trace
	next *state
}

// successors calls emit with every state one step from s.
func (m *machine) successors(s *state, emit func(step)) {
	n := m.cfg.Nodes
	for c := range s.clients {
		m.clientSteps(s, c, emit)
		m.identSteps(s, c, emit)
	}
	m.setSteps(s, emit)
	m.bootSteps(s, emit)
	m.reconfSteps(s, emit)
	for i, msg := range s.msgs {
		if !msg.reply {
			t := s.clone()
			t.msgs = append(t.msgs[:i:i], t.msgs[i+1:]...)
			srv := m.serverIn(s, msg)
			ks := s.nodes[srv].clone()
			res := m.exec(ks, s.nodeNow(srv), msg.req)
			t.nodes[srv] = ks
			ran := func() string {
				via := ""
				if srv != m.server(msg) {
					via = fmt.Sprintf(" through its entry %d, re-pointed", msg.node)
				}
				return fmt.Sprintf("node %d runs %s%s at %d ms: replies %v", srv, m.call(msg), via, s.nodeNow(srv), res)
			}
			if !m.reads(s, msg, res) {
				emit(step{ran, t})
				continue
			}
			// Two steps: the reply arrives at once (one step, so that the
			// common case costs the depth bound one step, not two), or it
			// stays on the wire and arrives later, or never.
			r := newMsg(msg2reply(msg, res))
			now := t.clone()
			what := m.deliver(now, r)
			emit(step{func() string { return ran() + "; " + m.who(msg) + " hears it at once" + what }, now})
			if m.cfg.RepliesAtOnce {
				continue
			}
			t.msgs = append(t.msgs, r)
			emit(step{func() string { return ran() + " (the reply is on the wire)" }, t})
			continue
		}
		t := s.clone()
		t.msgs = append(t.msgs[:i:i], t.msgs[i+1:]...)
		what := m.deliver(t, msg)
		emit(step{func() string {
			return fmt.Sprintf("%s hears node %d's %s reply %v%s", m.who(msg), m.serverIn(s, msg), msg.req.Script, msg.res, what)
		}, t})
		// A lost reply is one that is never delivered: it stays on the
		// wire, and every state a loss leads to is reached without it,
		// but for the message (which no invariant reads). So there is no
		// step that loses one.
	}
	if s.wipes < m.cfg.Wipes {
		for i := range s.nodes {
			kept := wiped(s.nodes[i])
			if len(s.nodes[i]) == len(kept) {
				continue
			}
			t := s.clone()
			t.nodes[i] = kept
			t.wipes++
			for c := range t.clients {
				if p := t.clients[c].phase; p != idle && p != done {
					t.clients[c].wiped |= 1 << i
				}
			}
			emit(step{func() string { return fmt.Sprintf("node %d loses its data (restart without persistence)", i) }, t})
		}
	}
	if s.T < m.cfg.MaxTime {
		t := s.clone()
		t.T++
		emit(step{func() string { return fmt.Sprintf("a tick: real time %d", t.T) }, t})
	}
	skewed := 0
	for x := 0; x < n; x++ {
		if s.ahead[x] > 0 {
			skewed++
		}
	}
	for x := range s.ahead {
		node := x < n && s.ahead[x] < m.cfg.Skew &&
			(s.ahead[x] > 0 || m.cfg.SkewedNodes == 0 || skewed < m.cfg.SkewedNodes)
		if node || (x >= n && s.ahead[x] < m.cfg.ClientSkew) {
			t := s.clone()
			t.ahead[x]++
			who := fmt.Sprintf("node %d", x)
			if x >= n {
				who = fmt.Sprintf("client %d", x-n)
			}
			emit(step{func() string { return fmt.Sprintf("%s's clock runs ahead by a tick (now %d ahead)", who, t.ahead[x]) }, t})
		}
	}
}

// exec runs the call req on ks at now (ms on the node's clock): a script,
// or step 0's reading of a reconfiguration.
func (m *machine) exec(ks keyspace, now int64, req script.Request) any {
	if req.Script == lookScript {
		return m.look(ks, now)
	}
	return m.lua.run(ks, now, req)
}

// reads reports whether the client could act on the reply res to q:
// replies it would ignore (a release's, one for an attempt it has left
// behind) are not put on the wire, which changes no state an invariant
// reads and spares the explorer their deliveries. A late "not admitted"
// is read: it starts the admission.
func (m *machine) reads(s *state, q msg, res any) bool {
	switch q.client {
	case operatorID:
		return m.bootReads(s, q)
	case reconfID:
		return m.reconfReads(s, q)
	}
	cl := s.clients[q.client]
	switch q.req.Script {
	case "release":
		return false
	case "acquire":
		if cl.phase == acquiring && cl.attempt == q.attempt {
			return true
		}
		rep, err := script.ParseAcquire(res.([]any))
		return err != nil || rep.Status == script.Unadmitted
	case "commit":
		return cl.phase == committing && cl.attempt == q.attempt
	case "extend":
		return cl.phase == holding && cl.extending && cl.attempt == q.attempt && cl.extends == q.round
	case "ident":
		return m.identReads(s, q)
	}
	return true
}

func msg2reply(q msg, res any) msg {
	return msg{reply: true, client: q.client, node: q.node, attempt: q.attempt, round: q.round, req: script.Request{Script: q.req.Script}, res: res}
}

// clientSteps are the steps client c may take on its own: start an
// attempt, give one up, release its lease, and drive its admissions.
func (m *machine) clientSteps(s *state, c int, emit func(step)) {
	cl := s.clients[c]
	cc := m.cfg.Clients[c]
	switch cl.phase {
	case idle:
		if cl.attempt < cc.Attempts && !s.ident[c].dup && m.started(s, c) && m.mayStart(s, c) {
			t := s.clone()
			m.startAttempt(t, c)
			tc := &t.clients[c]
			emit(step{func() string {
				return fmt.Sprintf("client %d starts TryLock attempt %d (value %s, ttl %v) at its clock %d: acquire to every node%s",
					c, tc.attempt, value(c, tc.attempt), cc.TTL, tc.t0, m.partNote(c))
			}, t})
		}
	case acquiring, committing:
		// The node timeout, or ctx: the attempt may end at any moment
		// before it decided. (The model lets it end at any step, which
		// covers every timeout.)
		if m.cfg.NoGiveUps {
			break
		}
		t := s.clone()
		m.fail(t, c)
		emit(step{func() string {
			return fmt.Sprintf("client %d gives up attempt %d (timeout) and cleans up", c, cl.attempt)
		}, t})
	case holding:
		// A LockAll's part is released with its set (setSteps).
		if !cc.Holds && m.setOf[c] < 0 {
			t := s.clone()
			m.cleanup(t, c)
			m.end(t, c)
			emit(step{func() string { return fmt.Sprintf("client %d releases its lease (attempt %d)", c, cl.attempt) }, t})
		}
		m.extendSteps(s, c, emit)
	}
	m.admissionSteps(s, c, emit)
}

// deliver hands a reply to its client, which acts on it as the library
// does, and says what the client decided, if anything.
func (m *machine) deliver(t *state, r msg) string {
	switch r.client {
	case operatorID:
		return m.deliverBoot(t, r)
	case reconfID:
		return m.deliverReconf(t, r)
	}
	c := r.client
	cl := &t.clients[c]
	switch r.req.Script {
	case "acquire":
		rep, err := script.ParseAcquire(r.res.([]any))
		if err != nil {
			panic(err)
		}
		if rep.Status == script.Unadmitted {
			// A late reply starts the admission too (docs/protocol.md,
			// "Liveness").
			cl.unadmitted |= 1 << r.node
			cl.adm.seen &^= 1 << r.node
		}
		if cl.phase != acquiring || cl.attempt != r.attempt {
			return " (late: ignored)"
		}
		if m.cfg.Confirm {
			m.readAcquire(cl, c, r.node, rep)
		}
		what := m.same(t, c, r.node, rep.Ident)
		return what + m.tallyAcquire(t, c, r.node, rep)
	case "commit":
		if cl.phase != committing || cl.attempt != r.attempt {
			return " (late: ignored)"
		}
		rep, err := script.ParseCommit(r.res.([]any))
		if err != nil {
			panic(err)
		}
		if rep.Committed {
			cl.commits |= 1 << r.node
		} else {
			cl.cfails |= 1 << r.node
		}
		what := m.same(t, c, r.node, rep.Ident)
		return what + m.tallyCommit(t, c)
	case "extend":
		if cl.phase != holding || !cl.extending || cl.attempt != r.attempt || cl.extends != r.round {
			return " (late: ignored)"
		}
		return m.tallyExtend(t, c, r)
	case "pending":
		if m.cfg.Confirm {
			return m.checked(t, r)
		}
		cl.admitting &^= 1 << r.node
		p, err := script.ParsePending(r.res.([]any))
		if err != nil {
			panic(err)
		}
		if p.Marker != "" {
			cl.unadmitted &^= 1 << r.node
			return " (admitted)"
		}
		cl.mark[r.node] = p.ID
		return ""
	case "admit":
		if m.cfg.Confirm {
			return m.admitted(t, r)
		}
		cl.admitting &^= 1 << r.node
		cl.mark[r.node] = ""
		if r.res == int64(script.Admitted) || r.res == int64(script.AdmittedAs) {
			cl.unadmitted &^= 1 << r.node
		}
		return ""
	case "ident":
		return m.deliverIdent(t, r)
	case "state":
		return m.confirmReply(t, r)
	case "reconfigure":
		return m.finished(t, r)
	}
	return ""
}
