package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// lockKey is the one key the clients contend for.
const lockKey = "k"

// machine holds what every state of one exploration shares: the
// configuration, each client's settings, and the interpreter.
type machine struct {
	cfg   Config
	q     int
	sigma []string         // per client: its settings σ
	size  []int            // per client: the entries of its node list
	qc    []int            // per client: a majority of its entries
	quar  []time.Duration  // per client: its quarantine Q(σ)
	known map[string]known // the settings the scenario uses (knownSettings)
	lua   *interp
	boxes script.Boxes
	// perms[k] lists the orders of k things, for canonical.
	perms [][][]int
	// solo lifts the bounds on a client's attempts and checks, for the
	// liveness checks' runs of one client alone.
	solo bool
	// enc is canonical's buffer for a state's encoding, reused.
	enc []byte
}

func newMachine(cfg Config) (*machine, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	in, err := newInterp(cfg.Patches)
	if err != nil {
		return nil, err
	}
	m := &machine{cfg: cfg, q: cfg.quorum(), lua: in}
	if m.known, err = knownSettings(cfg); err != nil {
		return nil, err
	}
	for k := 0; k <= cfg.Nodes; k++ {
		m.perms = append(m.perms, perms(k))
	}
	for _, cc := range cfg.Clients {
		q, err := script.CheckedQuarantine(cc.MaxTTL, cc.Factor)
		if err != nil {
			return nil, err
		}
		m.sigma = append(m.sigma, cc.settings(cc.entries(cfg.Nodes)))
		m.quar = append(m.quar, q)
		m.size = append(m.size, cc.entries(cfg.Nodes))
		m.qc = append(m.qc, quorum.Majority(cc.entries(cfg.Nodes)))
	}
	return m, nil
}

func (m *machine) initial() *state {
	n, c := m.cfg.Nodes, len(m.cfg.Clients)
	s := &state{ahead: make([]int, n+c), nodes: make([]keyspace, n), clients: make([]client, c), ident: m.initialIdent()}
	for i := range s.nodes {
		s.nodes[i] = keyspace{}
		for k, v := range m.cfg.Keys[i] {
			s.nodes[i][k] = &entry{kind: 's', str: v}
		}
		// The identity the clients' probes read (identity.go).
		s.nodes[i][script.IdentKey] = &entry{kind: 's', str: nodeID(i)}
	}
	if m.cfg.Admitted {
		for e := 0; e < m.size[0]; e++ {
			s.nodes[m.serverOf(0, e)][script.MarkerKey] = &entry{kind: 's', str: m.sigma[0]}
		}
	}
	return s
}

// step is one transition, with what it did in words.
type step struct {
	text func() string // only called to print a trace
	next *state
}

// value is attempt a's random value: deterministic, so that equal
// histories give equal states.
func value(c, a int) string { return fmt.Sprintf("c%d.%d", c, a) }

// acquire is the acquire call of client c's attempt a, prepared by the
// script package as a Client prepares it (a TryLock: no waiter id).
func (m *machine) acquire(c, a int) *script.Acquire {
	cc := m.cfg.Clients[c]
	settings := m.sigma[c]
	if cc.NoQuarantine {
		settings = ""
	}
	return m.boxes.Acquire(script.AcquireArgs{Key: lockKey, Value: value(c, a), TTL: cc.TTL, Settings: settings,
		Fencing: cc.Fencing, Line: cc.TTL})
}

// release is the release of client c's attempt a: a lease's Release and
// a failed attempt's cleanup send the same call for a TryLock.
func (m *machine) release(c, a int) script.Request {
	r := m.acquire(c, a).ReleaseArgs()
	r.Window = m.cfg.Clients[c].TTL / 2
	return m.boxes.Release(r).Request()
}

// successors calls emit with every state one step from s.
func (m *machine) successors(s *state, emit func(step)) {
	n := m.cfg.Nodes
	for c := range s.clients {
		m.clientSteps(s, c, emit)
		m.identSteps(s, c, emit)
	}
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
		if cl.attempt < cc.Attempts && !s.ident[c].dup && m.started(s, c) {
			t := s.clone()
			m.startAttempt(t, c)
			tc := &t.clients[c]
			emit(step{func() string {
				return fmt.Sprintf("client %d starts TryLock attempt %d (value %s, ttl %v) at its clock %d: acquire to every node",
					c, tc.attempt, value(c, tc.attempt), cc.TTL, tc.t0)
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
		if !cc.Holds {
			t := s.clone()
			m.cleanup(t, c)
			m.end(t, c)
			emit(step{func() string { return fmt.Sprintf("client %d releases its lease (attempt %d)", c, cl.attempt) }, t})
		}
		m.extendSteps(s, c, emit)
	}
	m.admissionSteps(s, c, emit)
}

// startAttempt starts client c's next attempt on t: its acquire call to
// every entry.
func (m *machine) startAttempt(t *state, c int) {
	cl := t.clients[c]
	tc := &t.clients[c]
	a := cl.attempt + 1
	*tc = client{phase: acquiring, attempt: a, t0: t.clientNow(m.cfg.Nodes, c), since: t.maxTok,
		unadmitted: cl.unadmitted, mark: cl.mark, admitting: cl.admitting, pendings: cl.pendings,
		adm: cl.adm, proven: t.ident[c].proven}
	req := m.acquire(c, a).Request()
	for i := 0; i < m.size[c]; i++ {
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: a, req: req}))
	}
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
			// A late reply starts the admission too (docs/fencing.md,
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

// readAcquire is what the acquire round's tally learns of the admission
// from a reply (acquire.go): a node that grants or holds the key is seen
// admitted, one held off by a reconfiguration to the client's settings
// is one in quarantine (and ends a conflict), one under other settings is
// a conflict.
func (m *machine) readAcquire(cl *client, c, i int, rep script.AcquireReply) {
	bit := uint8(1) << i
	switch {
	case rep.Status == script.Granted || rep.Status == script.Held:
		cl.adm.seen |= bit
		cl.adm.conflict = false
	case rep.Status == script.Mismatch && rep.Marker == script.Moving(m.sigma[c]):
		cl.unadmitted |= bit
		cl.adm.seen &^= bit
		cl.adm.conflict = false
	case rep.Status == script.Mismatch:
		cl.adm.conflict = true
	}
}

// tallyAcquire counts one acquire reply: the rule of acquire.go's tally
// (docs/fencing.md, "The protocol" steps 1-2, and DESIGN's acquire steps
// 2-4): a majority of grants with validity left wins; a round that can no
// longer reach a majority fails and is cleaned up.
func (m *machine) tallyAcquire(t *state, c, node int, rep script.AcquireReply) string {
	cl := &t.clients[c]
	cc := m.cfg.Clients[c]
	n := m.cfg.Nodes
	cl.answered |= 1 << node
	cl.replies[node] = rep
	if rep.Status == script.Granted {
		cl.granted |= 1 << node
	} else {
		cl.refused |= 1 << node
	}
	votes := cl.granted & cl.same // only from the server an entry was verified on (identity.go)
	if count(votes) < m.qc[c] {
		if quorum.Decided(m.size[c], m.qc[c], count(votes), count(cl.answered&^votes)) {
			m.fail(t, c)
			return fmt.Sprintf(" -> a majority is out of reach: attempt %d fails, cleanup sent", cl.attempt)
		}
		return ""
	}
	now := t.clientNow(n, c)
	elapsed := time.Duration(now-cl.t0) * Unit
	if m.validity(cc, elapsed) <= 0 {
		m.fail(t, c)
		return fmt.Sprintf(" -> %d grants but no validity left: attempt %d fails, cleanup sent", count(votes), cl.attempt)
	}
	// The entries that did not grant: the model lets the first extend
	// name them for re-creation (a superset of the client's, which learns
	// them from its first extend round).
	cl.missed = m.entries(c) &^ votes
	if !cc.Fencing {
		cl.phase, cl.deadline = holding, m.deadline(cc, cl.t0, now)
		return fmt.Sprintf(" -> LEASE: client %d holds %s until its clock reads %v", c, value(c, cl.attempt), cl.deadline)
	}
	var rs []script.AcquireReply
	for i := 0; i < m.size[c]; i++ {
		if cl.answered&(1<<i) != 0 {
			rs = append(rs, cl.replies[i])
		}
	}
	token, _, _, ok := script.Token(rs)
	if !ok {
		m.fail(t, c)
		return " -> the token would pass the largest bigint: fails"
	}
	cl.phase, cl.token = committing, token
	cl.proven, cl.same = t.ident[c].proven, 0
	req := script.NewCommit(script.CommitArgs{Key: lockKey, Value: value(c, cl.attempt), Token: token,
		Keep: cc.TTL + m.quar[c]}).Request()
	for i := 0; i < m.size[c]; i++ {
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: cl.attempt, req: req}))
	}
	return fmt.Sprintf(" -> %d grants: commit of token %d to every node", count(votes), token)
}

// tallyCommit counts the commit round (fence.go's commit): a majority of
// commits with validity left, recomputed from the start of the acquire
// round, gives the lease its token.
func (m *machine) tallyCommit(t *state, c int) string {
	cl := &t.clients[c]
	cc := m.cfg.Clients[c]
	n := m.cfg.Nodes
	votes := cl.commits & cl.same // only from the server an entry was verified on (identity.go)
	if count(votes) < m.qc[c] {
		if quorum.Decided(m.size[c], m.qc[c], count(votes), count((cl.commits|cl.cfails)&^votes)) {
			m.fail(t, c)
			return fmt.Sprintf(" -> the commit cannot reach a majority: attempt %d fails", cl.attempt)
		}
		return ""
	}
	now := t.clientNow(n, c)
	if m.validity(cc, time.Duration(now-cl.t0)*Unit) <= 0 {
		m.fail(t, c)
		return fmt.Sprintf(" -> committed but no validity left: attempt %d fails", cl.attempt)
	}
	cl.phase, cl.deadline = holding, m.deadline(cc, cl.t0, now)
	// Theorems 1 and 2 of docs/fencing.md: above every token committed
	// before this round began, and unlike every token committed at all.
	switch {
	case cl.token <= cl.since:
		t.bad = fmt.Sprintf("token order: client %d's token %d is not above %d, committed before its round began", c, cl.token, cl.since)
	case contains(t.tokens, cl.token):
		t.bad = fmt.Sprintf("token uniqueness: client %d's token %d was committed before", c, cl.token)
	}
	t.tokens = insert(t.tokens, cl.token)
	t.maxTok = max(t.maxTok, cl.token)
	return fmt.Sprintf(" -> LEASE: client %d holds %s with token %d until its clock reads %v", c, value(c, cl.attempt), cl.token, cl.deadline)
}

// validity is drift.Validity (or, with NoDrift, the defect that leaves
// the drift out).
func (m *machine) validity(cc ClientConfig, elapsed time.Duration) time.Duration {
	if m.cfg.NoDrift {
		return cc.TTL - elapsed
	}
	return drift.Validity(cc.TTL, elapsed, cc.Factor)
}

// deadline is when the holder stops trusting its lease, on its clock:
// t0 + ttl - drift (docs/fencing.md, "Deadlines count from the start of
// their round"), or with a defect put back in.
func (m *machine) deadline(cc ClientConfig, t0, now int) time.Duration {
	from := t0
	if m.cfg.DeadlineFromEnd {
		from = now
	}
	return time.Duration(from)*Unit + m.validity(cc, 0)
}

// fail ends client c's attempt without a lease and cleans up.
func (m *machine) fail(t *state, c int) {
	m.cleanup(t, c)
	m.end(t, c)
}

// cleanup sends the release to every node that granted or did not
// answer: one that answered anything but a grant ran the script once and
// did not SET (docs/fencing.md, "A release beats a late acquire").
func (m *machine) cleanup(t *state, c int) {
	cl := &t.clients[c]
	req := m.release(c, cl.attempt)
	for i := 0; i < m.size[c]; i++ {
		if cl.refused&(1<<i) == 0 {
			t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: cl.attempt, req: req}))
		}
	}
}

func (m *machine) end(t *state, c int) {
	cl := &t.clients[c]
	cl.phase = idle
	if cl.attempt >= m.cfg.Clients[c].Attempts {
		cl.phase = done
	}
}

// admissionSteps drive client c's admission of the nodes that answered
// "not admitted": the pending script starts (or reads) the node's
// quarantine, the admit script ends it. The model sends each at any
// moment, which covers every delay the library's admission may take
// (admission.go's step); the scripts alone decide.
// Not modelled: the peers' check (confirm), which Theorem 4 needs and
// Theorem 3 does not; with a single data loss no other settings can
// reach a majority anyway.
func (m *machine) admissionSteps(s *state, c int, emit func(step)) {
	cl := s.clients[c]
	cc := m.cfg.Clients[c]
	if cc.NoQuarantine {
		return
	}
	if m.cfg.Confirm {
		m.checkSteps(s, c, emit)
		return
	}
	for i := 0; i < m.size[c]; i++ {
		bit := uint8(1) << i
		if cl.unadmitted&bit == 0 || cl.admitting&bit != 0 {
			continue
		}
		t := s.clone()
		tc := &t.clients[c]
		var req script.Request
		var what string
		if cl.mark[i] == "" {
			if cl.pendings >= m.cfg.Pendings {
				continue
			}
			tc.pendings++
			id := fmt.Sprintf("p%d.%d", c, tc.pendings)
			req = script.PendingRequest(script.PendingArgs{ID: id, Settings: m.sigma[c], Quarantine: m.quar[c],
				TTL: 2*m.quar[c] + time.Second})
			what = fmt.Sprintf("client %d sends pending (id %s) to node %d", c, id, i)
		} else {
			req = script.AdmitRequest(script.AdmitArgs{ID: cl.mark[i], Settings: m.sigma[c]})
			what = fmt.Sprintf("client %d sends admit (mark %s) to node %d", c, cl.mark[i], i)
		}
		tc.admitting |= bit
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, req: req}))
		emit(step{func() string { return what }, t})
	}
}

func contains(xs []uint64, x uint64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func insert(xs []uint64, x uint64) []uint64 {
	i := 0
	for i < len(xs) && xs[i] < x {
		i++
	}
	xs = append(xs, 0)
	copy(xs[i+1:], xs[i:])
	xs[i] = x
	return xs
}

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
	args := []script.ExtendArgs{{Key: lockKey, Value: value(c, cl.attempt), TTL: cc.TTL}}
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
