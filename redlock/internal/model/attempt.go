package model

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

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
	return m.boxes.Acquire(script.AcquireArgs{Key: m.key[c], Value: value(c, a), TTL: cc.TTL, Settings: settings,
		Fencing: cc.Fencing, Line: cc.TTL})
}

// release is the release of client c's attempt a: a lease's Release and
// a failed attempt's cleanup send the same call for a TryLock.
func (m *machine) release(c, a int) script.Request {
	r := m.acquire(c, a).ReleaseArgs()
	r.Window = m.cfg.Clients[c].TTL / 2
	return m.boxes.Release(r).Request()
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

// readAcquire is what the acquire round's tally learns of the admission
// from a reply (redlock's tally.go): a node that grants or holds the key is seen
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

// tallyAcquire counts one acquire reply: the rule of redlock's tally
// (tally.go; docs/protocol.md, "The protocol" steps 1-2, and
// docs/design.md, "The lock protocol"): a majority of grants with
// validity left wins; a round that can no longer reach a majority fails
// and is cleaned up.
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
	req := script.NewCommit(script.CommitArgs{Key: m.key[c], Value: value(c, cl.attempt), Token: token,
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
	// Theorems 1 and 2 of docs/protocol.md: above every token committed
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
// t0 + ttl - drift (docs/protocol.md, "Deadlines count from the start of
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
// did not SET (docs/protocol.md, "A release beats a late acquire").
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
