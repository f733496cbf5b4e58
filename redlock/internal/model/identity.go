package model

import (
	"fmt"
	"strconv"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// One server, one vote (redlock/identity.go; docs/protocol.md, "One
// server, one vote"). A client's node list may name one server twice
// (ClientConfig.Servers: entry i reaches node Servers[i]); the acquire
// script answers a repeated SET of the client's own value as granted, so
// such a client would count that server as two votes. An entry's replies
// count as votes (grants, fence commits, renewals) only once the entry is
// verified, by a proof round: the ident script on every entry, each reply
// arriving at once, later or never, and script.Prove, the rule identity.go
// applies, deciding on the ids heard once every entry answered or at the
// round's timeout, which may come at any moment. Proofs are one at a time
// per client, and a client may start one at any moment (up to
// Config.Proofs), which covers New's probe (a proof round whose missing
// replies are the entries down at New), the proof after an attempt that
// met an unverified entry, and the one in the background after a won
// attempt or a reply from another server (proveSoon). A round that finds
// two entries with one identity refuses the client for good
// (DuplicateNodeError): it starts no more attempts.
//
// An entry is verified with the id it read, and a reply counts only if
// the server that ran it read that id (script.SameServer, against the ids
// as the reply's round read them when it began): an entry re-pointed
// after its proof (ClientConfig.Repoint) answers with another server's
// id, counts for nothing, and is verified no longer. Every node starts
// with an id of its own (nodeID), as the clients' probes left it; a data
// loss keeps it (see wipe).
//
// A client whose entries are the nodes (no Servers) starts with every
// entry verified, as after a probe that heard every entry: proofs only
// take votes away, and cannot find a duplicate among distinct servers.
// A client with Servers starts with the entries of Probed verified; with
// NoIdentityCheck (the defect) every entry votes from the start.

// prover is a client's identity state. Entry sets are bit masks.
type prover struct {
	repointed bool             // ClientConfig.Repoint happened
	proven    [maxNodes]string // the id each entry was verified with ("": not verified)
	dup       bool             // two entries proved to be one server: refused for good
	proving   bool             // a proof round is out
	rounds    int              // proof rounds started
	answered  uint8
	ids       [maxNodes]string // what each entry read in the current round
}

// verified is the set of the entries that are verified.
func (p *prover) verified() uint8 {
	var out uint8
	for i, v := range p.proven {
		if v != "" {
			out |= 1 << i
		}
	}
	return out
}

// nodeID is node i's identity at the start (script.IdentKey).
func nodeID(i int) string {
	if i >= 0 && i < len(nodeIDs) {
		return nodeIDs[i]
	}
	return fmt.Sprintf("n%d", i)
}

// nodeIDs are the ids of nodes 0 to maxNodes-1, made once: states encode
// them on every step.
var nodeIDs = func() (ids [maxNodes]string) {
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i)
	}
	return ids
}()

// canonID encodes v, an id entry (or node) e read or was proven with, for
// a state's identity: the id node e started with is written "=", so that
// a renaming of the nodes (Symmetry, where entry e is node e and ids never
// change) leaves it alike; any other id as it is.
func canonID(e int, v string) string {
	if v == nodeID(e) {
		return "="
	}
	return v
}

// initialIdent is every client's identity state at the start.
func (m *machine) initialIdent() []prover {
	out := make([]prover, len(m.cfg.Clients))
	for c, cc := range m.cfg.Clients {
		all := len(cc.Servers) == 0 || cc.Probed == nil || m.cfg.NoIdentityCheck
		for e := 0; e < m.size[c]; e++ {
			if all {
				out[c].proven[e] = nodeID(m.serverOf(c, e))
			}
		}
		if all {
			continue
		}
		for _, e := range cc.Probed {
			out[c].proven[e] = nodeID(m.serverOf(c, e))
		}
	}
	return out
}

// counts reports whether a reply of client c's entry e, from a server
// whose id is read, counts, with the ids its round read when it began
// (proven): script.SameServer, or, with NoReplyIdentity (the defect I1),
// any reply of an entry verified then. Where it does not for an entry
// verified then, the entry is verified no longer (identity.go's moved),
// unless a proof verified it again since.
func (m *machine) counts(t *state, c, e int, proven *[maxNodes]string, read string) bool {
	was := proven[e]
	if m.cfg.NoReplyIdentity {
		return was != ""
	}
	if script.SameServer(was, read) {
		return true
	}
	if p := &t.ident[c]; was != "" && p.proven[e] == was {
		p.proven[e] = ""
	}
	return false
}

// same notes whether client c's reply through entry e in its current
// round came from the server the entry was verified on (its id is read):
// it counts then, and otherwise never (see counts).
func (m *machine) same(t *state, c, e int, read string) string {
	cl := &t.clients[c]
	was := t.ident[c].proven[e]
	if m.counts(t, c, e, &cl.proven, read) {
		cl.same |= 1 << e
		return ""
	}
	if cl.proven[e] != "" && was != "" && t.ident[c].proven[e] == "" {
		return fmt.Sprintf(" (from another server than its entry %d was verified on: the entry is verified no longer)", e)
	}
	return ""
}

// wiped is ks after a data loss: nothing but the server's id, which the
// model keeps. A server that loses its data loses its id too, and the
// library proves an entry that answers with none again (identity.go)
// before it counts: that only takes votes away, so a model in which the
// id survives allows every run the library allows, and more, without the
// proof rounds each loss would cost the search.
func wiped(ks keyspace) keyspace {
	out := keyspace{}
	if e := ks[script.IdentKey]; e != nil {
		out[script.IdentKey] = e
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
	if p.dup || p.verified() == allNodes(n) {
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
	proven := p.proven[:n]
	if m.cfg.ProofIgnoresMissing {
		proven = make([]string, n) // the defect: no verified entry is missed
	}
	pr := script.Prove(p.ids[:n], proven)
	ids := p.ids
	p.proving, p.answered, p.ids = false, 0, [maxNodes]string{}
	switch {
	case pr.Dup:
		p.dup = true
		return fmt.Sprintf(" -> entries %d and %d are one server: client %d is refused for good", pr.First, pr.Second, c)
	case pr.Missed:
		return " -> a verified entry did not answer: nothing proved"
	}
	for _, i := range pr.Verified {
		p.proven[i] = ids[i]
	}
	return fmt.Sprintf(" -> entries %v verified", pr.Verified)
}

// encode appends a client's identity state with node i renamed perm[i].
func (p *prover) encode(b []byte, perm, inv []int) []byte {
	b = append(b, 'I', permMask(p.answered, perm))
	for _, v := range [...]bool{p.dup, p.proving, p.repointed} {
		b = strconv.AppendBool(b, v)
		b = append(b, ',')
	}
	b = strconv.AppendInt(b, int64(p.rounds), 10)
	b = append(b, ',')
	for j := range perm {
		b = append(b, canonID(inv[j], p.proven[inv[j]])...)
		b = append(b, ',')
		b = append(b, canonID(inv[j], p.ids[inv[j]])...)
		b = append(b, ',')
	}
	for e := len(perm); e < maxNodes; e++ { // a list longer than the nodes (no Symmetry)
		b = append(b, p.proven[e]...)
		b = append(b, ',')
		b = append(b, p.ids[e]...)
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
