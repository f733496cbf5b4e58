package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// An operator runs Client.Bootstrap (redlock/bootstrap.go), with the
// settings of Clients[0], up to Config.Bootstraps times, at any moment:
// it reads every node's admission state (the state script), decides with
// script.BootstrapUse, the rule Bootstrap calls, and then either starts
// the quarantine of the unmarked nodes (signs of use: ErrNotNew), or
// claims every node (bootstrap.lua, claim) and, when every claim was
// taken within the window, admits every node that still carries its
// claim (bootstrap.lua, admit). This is docs/protocol.md, "Bootstrap", and
// the Bootstrap case of Theorem 3's proof.
//
// Modelled as the library does it: every round waits for every node (a
// reply that never arrives ends the run at its timeout, which the model
// lets come at any moment), a node admitted under other settings refuses
// the run, a claim round that finds a node admitted or someone else's
// mark falls back to the quarantines of every node, and a claim round
// slower than the window w (on the operator's clock, which keeps real
// time) is claimed again, three passes at most; the admit script itself
// checks its claim's age against w on the node's clock. What it starts on
// nodes in use, admission.go's step, is modelled as its first call, the
// pending script, whose reply Bootstrap only reports: the admit that may
// follow a quarantine later is the ordinary admission the clients' steps
// model (admissionSteps). The admit replies are not read either (they
// only shape Bootstrap's error).

// operatorID is the client index of the operator's messages.
const operatorID = -1

// bootPhase is where the operator is in a Bootstrap run.
type bootPhase byte

const (
	bootIdle     bootPhase = iota // no run under way
	bootReading                   // the state calls are out
	bootClaiming                  // the claim calls are out
)

// operator is the state of the operator's Bootstrap runs.
type operator struct {
	phase bootPhase
	runs  int // runs started
	round int // rounds sent (state reads and claim passes): their messages' attempt
	pass  int // the current run's claim pass, from 0
	t0    int // real time when the pass's claims went out, in ticks
	// claimed: the nodes claimed (every node, or with the defect the
	// unmarked ones); answered: the nodes heard from in this round.
	claimed  uint8
	answered uint8
	states   [maxNodes]script.State // reading: each node's marker and pending settings
	claims   [maxNodes]script.BootstrapStatus
}

// bootID is run r's claim id, a fresh value in the library.
func bootID(r int) string { return fmt.Sprintf("b%d", r) }

// bootWindow is deployment.go's bootstrapWindow, w = 0.9·Q(1−f)/(2(1+f))
// (docs/protocol.md, "Bootstrap"), for the operator's settings.
func (m *machine) bootWindow() time.Duration {
	bc := m.cfg.BootClient
	f := m.cfg.Clients[bc].Factor
	return time.Duration(0.9 * float64(m.quar[bc]) * (1 - f) / (2 * (1 + f)))
}

func allNodes(n int) uint8 { return uint8(1)<<n - 1 }

// bootSteps are the operator's own steps: start a run, or end a round at
// its timeout.
func (m *machine) bootSteps(s *state, emit func(step)) {
	o := s.boot
	switch o.phase {
	case bootIdle:
		if o.runs >= m.cfg.Bootstraps || !m.started(s, m.cfg.BootClient) {
			return
		}
		if m.cfg.BootAfterPending && !pendingSomewhere(s) {
			return
		}
		t := s.clone()
		t.boot.runs++
		m.bootRound(t, bootReading, allNodes(m.size[m.cfg.BootClient]), script.StateRequest())
		emit(step{func() string {
			return fmt.Sprintf("the operator runs Bootstrap (run %d): state to every node", t.boot.runs)
		}, t})
	case bootReading:
		t := s.clone()
		m.bootEnd(t)
		emit(step{func() string {
			return fmt.Sprintf("Bootstrap run %d times out reading the nodes: refused, nothing written", o.runs)
		}, t})
	case bootClaiming:
		t := s.clone()
		what := m.bootClaimed(t, false)
		emit(step{func() string { return fmt.Sprintf("Bootstrap run %d's claim round times out%s", o.runs, what) }, t})
	}
}

// bootRound sends req to the nodes of set as a new round.
func (m *machine) bootRound(t *state, phase bootPhase, set uint8, req script.Request) {
	o := &t.boot
	o.round++
	o.phase, o.answered = phase, 0
	o.states, o.claims = [maxNodes]script.State{}, [maxNodes]script.BootstrapStatus{}
	for i := 0; i < m.size[m.cfg.BootClient]; i++ {
		if set&(1<<i) != 0 {
			t.msgs = append(t.msgs, newMsg(msg{client: operatorID, node: i, attempt: o.round, req: req}))
		}
	}
}

// bootEnd ends the run.
func (m *machine) bootEnd(t *state) {
	o := &t.boot
	*o = operator{runs: o.runs, round: o.round}
}

// bootReads reports whether Bootstrap reads the reply to q (see reads).
func (m *machine) bootReads(s *state, q msg) bool {
	o := s.boot
	switch {
	case q.attempt != o.round:
		return false
	case q.req.Script == "state":
		return o.phase == bootReading
	case q.req.Script == "bootstrap" && q.req.Args[0] == "claim":
		return o.phase == bootClaiming
	}
	return false
}

// deliverBoot hands a reply to the operator.
func (m *machine) deliverBoot(t *state, r msg) string {
	o := &t.boot
	if r.attempt != o.round {
		return " (late: ignored)"
	}
	bit := uint8(1) << r.node
	switch {
	case r.req.Script == "state" && o.phase == bootReading:
		st, err := script.ParseState(r.res.([]any))
		if err != nil {
			panic(err)
		}
		o.states[r.node] = script.State{Marker: st.Marker, Pending: st.Pending}
		o.answered |= bit
		if o.answered == allNodes(m.size[m.cfg.BootClient]) {
			return m.bootRead(t)
		}
	case r.req.Script == "bootstrap" && o.phase == bootClaiming:
		o.claims[r.node] = script.BootstrapStatus(r.res.(int64))
		o.answered |= bit
		if o.answered == o.claimed {
			return m.bootClaimed(t, true)
		}
	}
	return ""
}

// bootRead is Bootstrap once every node's state is read (states, then
// the decision).
func (m *machine) bootRead(t *state) string {
	o := &t.boot
	n := m.size[m.cfg.BootClient]
	sigma := m.sigma[m.cfg.BootClient]
	for i := 0; i < n; i++ {
		if mk := o.states[i].Marker; mk != "" && mk != sigma && mk != script.Moving(sigma) {
			m.bootEnd(t)
			return fmt.Sprintf(" -> node %d is admitted under other settings: Bootstrap refused, nothing written", i)
		}
	}
	unmarked, used := script.BootstrapUse(o.states[:n], sigma)
	if m.cfg.BootstrapIgnoresMarkers {
		// The defect: a node admitted with these settings is no sign of
		// use; only a quarantine in progress is.
		used = false
		for i := 0; i < n; i++ {
			used = used || o.states[i].Pending != ""
		}
	}
	if m.cfg.BootstrapAdmitsPending {
		// The defect: only an admitted node is a sign of use.
		used = false
		for i := 0; i < n; i++ {
			used = used || o.states[i].Marker == sigma
		}
	}
	set := uint8(0)
	for _, i := range unmarked {
		set |= 1 << i
	}
	switch {
	case len(unmarked) == 0:
		m.bootEnd(t)
		return " -> every node is admitted with these settings: nothing to do"
	case used:
		m.bootInUse(t, set)
		return fmt.Sprintf(" -> signs of use: ErrNotNew, the quarantine of nodes %v started", unmarked)
	}
	// The library claims every node (with no sign of use, every node is
	// unmarked); the defect only the unmarked ones, leaving the admitted
	// ones as they are.
	o.claimed, o.pass = allNodes(n), 0
	if m.cfg.BootstrapIgnoresMarkers {
		o.claimed = set
	}
	m.bootClaim(t)
	return fmt.Sprintf(" -> nodes %v bare: claim (id %s) to each", unmarked, bootID(o.runs))
}

// pendingSomewhere reports whether a node carries a pending mark.
func pendingSomewhere(s *state) bool {
	for i, ks := range s.nodes { // read only: states share key spaces
		if e := ks[script.PendingKey]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) {
			return true
		}
	}
	return false
}

// bootClaim sends a claim pass.
func (m *machine) bootClaim(t *state) {
	o := &t.boot
	o.t0 = t.T
	bc := m.cfg.BootClient
	req := script.ClaimRequest(script.ClaimArgs{Settings: m.sigma[bc], ID: bootID(o.runs), Quarantine: m.quar[bc],
		TTL: 2*m.quar[bc] + time.Second})
	m.bootRound(t, bootClaiming, o.claimed, req)
}

// bootClaimed is bootstrap.go's claim deciding on the replies heard
// (every one, or at the timeout those that came) and what Bootstrap does
// next.
func (m *machine) bootClaimed(t *state, heardAll bool) string {
	o := &t.boot
	var mismatch, taken bool
	for i := 0; i < m.size[m.cfg.BootClient]; i++ {
		if o.answered&(1<<i) == 0 {
			continue
		}
		switch o.claims[i] {
		case script.BootstrapMismatch:
			mismatch = true
		case script.BootstrapDone:
		default:
			taken = true
		}
	}
	switch {
	case mismatch:
		m.bootEnd(t)
		return " -> a node was admitted meanwhile under other settings: Bootstrap refused"
	case taken:
		m.bootInUse(t, allNodes(m.size[m.cfg.BootClient]))
		return " -> a node was used since it was read: ErrNotNew, the quarantine of every node started"
	case !heardAll:
		m.bootEnd(t)
		return " -> a node did not take its claim: Bootstrap refused (its claims are ordinary quarantines)"
	}
	w := m.bootWindow()
	if took := time.Duration(t.T-o.t0) * Unit; took > w {
		if o.pass == 2 {
			m.bootEnd(t)
			return fmt.Sprintf(" -> the claims took %v, more than the window %v, three times: Bootstrap refused", took, w)
		}
		o.pass++
		m.bootClaim(t)
		return fmt.Sprintf(" -> the claims took %v, more than the window %v: claim again", took, w)
	}
	req := script.ClaimedRequest(script.ClaimedArgs{Settings: m.sigma[m.cfg.BootClient], ID: bootID(o.runs), Window: w})
	for i := 0; i < m.size[m.cfg.BootClient]; i++ {
		if o.claimed&(1<<i) != 0 {
			t.msgs = append(t.msgs, newMsg(msg{client: operatorID, node: i, attempt: o.round, req: req}))
		}
	}
	m.bootEnd(t)
	return " -> every claim taken: admit on its claim to each node"
}

// bootInUse is bootstrap.go's inUse: the ordinary quarantine of the
// nodes of set starts (admission.go's step, its pending call), and the
// run ends with ErrNotNew.
func (m *machine) bootInUse(t *state, set uint8) {
	o := &t.boot
	bc := m.cfg.BootClient
	for i := 0; i < m.size[bc]; i++ {
		if set&(1<<i) == 0 {
			continue
		}
		req := script.PendingRequest(script.PendingArgs{ID: bootID(o.runs) + ".q", Settings: m.sigma[bc],
			Quarantine: m.quar[bc], TTL: 2*m.quar[bc] + time.Second})
		t.msgs = append(t.msgs, newMsg(msg{client: operatorID, node: i, attempt: o.round, req: req}))
	}
	m.bootEnd(t)
}

// encode appends the operator's state with node i renamed perm[i].
func (o *operator) encode(b []byte, perm, inv []int) []byte {
	b = append(b, 'B', byte(o.phase))
	for _, v := range [...]int{o.runs, o.round, o.pass, o.t0} {
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, ',')
	}
	b = append(b, permMask(o.claimed, perm), permMask(o.answered, perm))
	for j := range perm {
		i := inv[j]
		b = append(b, o.states[i].Marker...)
		b = append(b, ',')
		b = append(b, o.states[i].Pending...)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(o.claims[i]), 10)
		b = append(b, ',')
	}
	return append(b, '|')
}

// permMask renames the nodes of a set: node i becomes perm[i].
func permMask(m uint8, perm []int) byte {
	var out uint8
	for i, p := range perm {
		if m&(1<<i) != 0 {
			out |= 1 << p
		}
	}
	return out
}

// encodeActors appends the state of the operator and of the clients'
// identity proofs, with node i renamed perm[i].
func (s *state) encodeActors(b []byte, perm, inv []int) []byte {
	b = s.boot.encode(b, perm, inv)
	b = s.reconf.encode(b)
	for c := range s.ident {
		b = s.ident[c].encode(b, perm, inv)
	}
	return b
}
