package model

import (
	"fmt"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// One server, one vote (redlock/identity.go; docs/fencing.md, "One
// server, one vote"). A client's node list may name one server twice
// (ClientConfig.Servers: entry i reaches node Servers[i]); the acquire
// script answers a repeated SET of the client's own value as granted, so
// such a client would count that server as two votes. An entry's replies
// count as votes (grants, fence commits) only once the entry is verified,
// by a proof round: the ident script on every entry, each reply arriving
// at once, later or never, and script.Prove, the rule identity.go
// applies, deciding on the ids heard once every entry answered or at the
// round's timeout, which may come at any moment. Proofs are one at a time
// per client, and a client may start one at any moment (up to
// Config.Proofs), which covers New's probe (a proof round whose missing
// replies are the entries down at New), the proof after an attempt that
// met an unverified entry, and the one in the background after a won
// attempt (proveSoon). A round that finds two entries with one identity
// refuses the client for good (DuplicateNodeError): it starts no more
// attempts.
//
// A client whose entries are the nodes (no Servers) starts with every
// entry verified, as after a probe that heard every entry: proofs only
// take votes away, and cannot find a duplicate among distinct servers.
// A client with Servers starts with none verified; with NoIdentityCheck
// (the defect) every entry votes from the start.

// prover is a client's identity state. Entry sets are bit masks.
type prover struct {
	repointed bool  // ClientConfig.Repoint happened
	verified  uint8 // the entries whose replies count as votes
	dup       bool  // two entries proved to be one server: refused for good
	proving   bool  // a proof round is out
	rounds    int   // proof rounds started
	answered  uint8
	ids       [maxNodes]string // what each entry read in the current round
}

// initialIdent is every client's identity state at the start.
func (m *machine) initialIdent() []prover {
	out := make([]prover, len(m.cfg.Clients))
	for c, cc := range m.cfg.Clients {
		if len(cc.Servers) == 0 || cc.Probed == nil || m.cfg.NoIdentityCheck {
			out[c].verified = allNodes(m.size[c])
			continue
		}
		for _, i := range cc.Probed {
			out[c].verified |= 1 << i
		}
	}
	return out
}

// server is the node that msg's entry reaches.
func (m *machine) server(q msg) int {
	switch {
	case q.client >= 0:
		return m.serverOf(q.client, q.node)
	case q.client == operatorID:
		return m.serverOf(m.cfg.BootClient, q.node)
	}
	return q.node // the reconfiguration's calls name the node itself
}

// serverIn is the node that msg's entry reaches in s: its server, or the
// node it was re-pointed to (ClientConfig.Repoint).
func (m *machine) serverIn(s *state, q msg) int {
	if q.client >= 0 && s.ident[q.client].repointed {
		if rp := m.cfg.Clients[q.client].Repoint; rp[0] == q.node {
			return rp[1]
		}
	}
	return m.server(q)
}

// serverOf is the node that client c's entry e reaches.
func (m *machine) serverOf(c, e int) int {
	if sv := m.cfg.Clients[c].Servers; len(sv) > 0 {
		return sv[e]
	}
	return e
}

// who names a message's sender, and the entry it went through when that
// is not the node's own.
func (m *machine) who(q msg) string {
	switch q.client {
	case operatorID:
		return "Bootstrap"
	case reconfID:
		return "Reconfigure"
	}
	if sv := m.cfg.Clients[q.client].Servers; len(sv) > 0 && sv[q.node] != q.node {
		return fmt.Sprintf("client %d through its entry %d", q.client, q.node)
	}
	return fmt.Sprintf("client %d", q.client)
}

// call names a call on the wire: its script, its sender and its attempt
// (or round).
func (m *machine) call(q msg) string {
	name, round := q.req.Script, "attempt"
	switch {
	case q.client == operatorID:
		round = "round"
		if name == "bootstrap" {
			name += " " + q.req.Args[0]
		}
	case q.client == reconfID:
		round = "run"
		if name == "reconfigure" {
			name += " " + q.req.Args[0]
		}
	case name == "reconfigure":
		name += " " + q.req.Args[0]
	case name == "ident":
		round = "proof"
	}
	return fmt.Sprintf("%s of %s (%s %d)", name, m.who(q), round, q.attempt)
}

// identSteps are client c's proof steps: start a proof round, or decide
// one at its timeout with the ids heard.
func (m *machine) identSteps(s *state, c int, emit func(step)) {
	p := s.ident[c]
	n := m.size[c]
	if rp := m.cfg.Clients[c].Repoint; rp != nil && !p.repointed {
		t := s.clone()
		t.ident[c].repointed = true
		emit(step{func() string {
			return fmt.Sprintf("client %d's entry %d (node %d) is re-pointed to node %d (a proxy, a DNS name): go-redis reconnects", c, rp[0], m.serverOf(c, rp[0]), rp[1])
		}, t})
	}
	if p.dup || p.verified == allNodes(n) {
		return
	}
	if p.proving {
		t := s.clone()
		what := m.prove(t, c)
		emit(step{func() string { return fmt.Sprintf("client %d's identity proof %d times out%s", c, p.rounds, what) }, t})
		return
	}
	if p.rounds >= m.cfg.Proofs {
		return
	}
	t := s.clone()
	tp := &t.ident[c]
	tp.rounds++
	tp.proving, tp.answered, tp.ids = true, 0, [maxNodes]string{}
	for i := 0; i < n; i++ {
		req := script.IdentRequest(fmt.Sprintf("id%d.%d.%d", c, tp.rounds, i))
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: tp.rounds, req: req}))
	}
	emit(step{func() string {
		return fmt.Sprintf("client %d starts identity proof %d: ident through every entry", c, tp.rounds)
	}, t})
}

// identReads reports whether client c reads the reply to q (see reads).
func (m *machine) identReads(s *state, q msg) bool {
	p := s.ident[q.client]
	return p.proving && p.rounds == q.attempt
}

// deliverIdent hands an ident reply to its client.
func (m *machine) deliverIdent(t *state, r msg) string {
	p := &t.ident[r.client]
	if !p.proving || p.rounds != r.attempt {
		return " (late: ignored)"
	}
	p.ids[r.node] = r.res.(string)
	p.answered |= 1 << r.node
	if p.answered == allNodes(m.size[r.client]) {
		return m.prove(t, r.client)
	}
	return ""
}

// prove ends client c's proof round: identity.go's proveLocked, with the
// rule script.Prove.
func (m *machine) prove(t *state, c int) string {
	p := &t.ident[c]
	n := m.size[c]
	verified := make([]bool, n)
	for i := range verified {
		verified[i] = p.verified&(1<<i) != 0
	}
	if m.cfg.ProofIgnoresMissing {
		verified = make([]bool, n) // the defect: no verified entry is missed
	}
	pr := script.Prove(p.ids[:n], verified)
	p.proving, p.answered, p.ids = false, 0, [maxNodes]string{}
	switch {
	case pr.Dup:
		p.dup = true
		return fmt.Sprintf(" -> entries %d and %d are one server: client %d is refused for good", pr.First, pr.Second, c)
	case pr.Missed:
		return " -> a verified entry did not answer: nothing proved"
	}
	for _, i := range pr.Verified {
		p.verified |= 1 << i
	}
	return fmt.Sprintf(" -> entries %v verified", pr.Verified)
}

// encode appends a client's identity state with node i renamed perm[i].
func (p *prover) encode(b []byte, perm, inv []int) []byte {
	b = append(b, 'I', permMask(p.verified, perm), permMask(p.answered, perm))
	b = fmt.Appendf(b, "%t,%t,%t,%d,", p.dup, p.proving, p.repointed, p.rounds)
	for j := range perm {
		b = append(b, p.ids[inv[j]]...)
		b = append(b, ',')
	}
	return append(b, '|')
}

// checkActors refuses a configuration of the operator or the node lists
// the model cannot run faithfully.
func (cfg *Config) checkActors() error {
	if cfg.Bootstraps < 0 || cfg.Proofs < 0 {
		return fmt.Errorf("model: bounds must not be negative")
	}
	for c, cc := range cfg.Clients {
		if rp := cc.Repoint; rp != nil && (len(rp) != 2 || rp[0] < 0 || rp[0] >= cc.entries(cfg.Nodes) || rp[1] < 0 || rp[1] >= cfg.Nodes || cfg.Symmetry) {
			return fmt.Errorf("model: client %d: Repoint %v must be {entry, node}, without Symmetry", c, rp)
		}
		if len(cc.Servers) == 0 {
			if len(cc.Probed) > 0 {
				return fmt.Errorf("model: client %d: Probed without Servers", c)
			}
			continue
		}
		if len(cc.Servers) > maxNodes || (cfg.Symmetry && len(cc.Servers) != cfg.Nodes) {
			return fmt.Errorf("model: client %d lists %d entries (with Symmetry: %d, and at most %d)", c, len(cc.Servers), cfg.Nodes, maxNodes)
		}
		for _, sv := range cc.Servers {
			if sv < 0 || sv >= cfg.Nodes {
				return fmt.Errorf("model: client %d: entry to node %d, which is not one", c, sv)
			}
		}
		// New's probe verifies only entries of distinct servers (it
		// refuses the client otherwise).
		probed := map[int]bool{}
		for _, i := range cc.Probed {
			if i < 0 || i >= cfg.Nodes {
				return fmt.Errorf("model: client %d: probed entry %d, which is not one", c, i)
			}
			if probed[cc.Servers[i]] {
				return fmt.Errorf("model: client %d: two probed entries reach node %d: New would refuse the client", c, cc.Servers[i])
			}
			probed[cc.Servers[i]] = true
		}
		// The symmetry reduction renames nodes, and a client's entries
		// with them: sound only when every entry reaches its own node.
		if cfg.Symmetry {
			for i, sv := range cc.Servers {
				if sv != i {
					return fmt.Errorf("model: client %d maps entry %d to node %d: nodes are not interchangeable, turn Symmetry off", c, i, sv)
				}
			}
		}
	}
	return cfg.checkReconfigs()
}
