package model

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The admission as admission.go's check runs it (Config.Confirm), one
// check per node at a time, any number of nodes at once, each started at
// any moment (which covers the delays of the library's admitNow and its
// background loops) while the client has not met a conflict:
//
//  1. the pending script (it starts the node's quarantine, or reads the
//     one in progress), Replace set when the client has seen another of
//     its entries admitted. Its reply decides: a node admitted with the
//     client's settings is seen; one held off by a reconfiguration to
//     them is finished (2); one under other settings is a conflict, and
//     the client starts no more checks (until a node answers admitted, or
//     held off by a reconfiguration to its settings); a quarantine with
//     other settings, or not over on the node's clock, ends the check;
//  2. a held-off node: the finish step of reconfigure.lua (as
//     reconfigure.go's finish), which admits it once its hold-off is over;
//  3. a quarantine over: confirm, the state script to every other entry,
//     each reply at once, later or never, deciding with script.ReadPeer
//     and script.Confirm, the rule admission.go applies, as soon as a
//     peer reads admitted, or once every peer answered, or at its timeout
//     (any moment, unless NoGiveUps) with the replies heard;
//  4. confirmed: the admit script with the mark the pending script read.
//
// A check's calls carry, as their attempt, the number of the pending call
// that began it, and its confirm's calls, as their round, the entry
// checked plus one, so that a late reply of an earlier check is ignored.

// conf is one entry's confirm in progress.
type conf struct {
	active bool
	seq    int    // the check's pending call
	mark   string // the pending mark read, for the admit
	heard  uint8  // the peers that answered
	peers  [maxNodes]script.Peer
}

// adm is a client's admission state in Config.Confirm (admission.go's
// seen and conflict, and the confirms out).
type adm struct {
	seen     uint8 // entries last seen admitted with the client's settings
	conflict bool  // met a node under other settings: no checks
	conf     [maxNodes]conf
}

func (a *adm) encode(b []byte) []byte {
	b = fmt.Appendf(b, "A%d,%t,", a.seen, a.conflict)
	for i := range a.conf {
		if f := a.conf[i]; f.active {
			b = fmt.Appendf(b, "%d:%d,%s,%d,%v;", i, f.seq, f.mark, f.heard, f.peers)
		}
	}
	return b
}

// checkSteps are client c's admission checks: one per entry it found not
// admitted, with no check of it in progress; and a confirm given up.
func (m *machine) checkSteps(s *state, c int, emit func(step)) {
	cl := s.clients[c]
	for i := 0; i < m.size[c]; i++ {
		bit := uint8(1) << i
		if f := cl.adm.conf[i]; f.active && !m.cfg.NoGiveUps {
			t := s.clone()
			tc := &t.clients[c]
			tc.adm.conf[i] = conf{}
			tc.admitting &^= bit
			dropReads(t, c, i)
			emit(step{func() string { return fmt.Sprintf("client %d's confirm of entry %d times out", c, i) }, t})
		}
		t := s.clone()
		if !m.check(t, c, i) {
			continue
		}
		emit(step{func() string {
			return fmt.Sprintf("client %d checks entry %d: pending (id %s)", c, i, pendingID(c, t.clients[c].pendings))
		}, t})
	}
}

func pendingID(c, k int) string { return fmt.Sprintf("p%d.%d", c, k) }

// check starts client c's check of entry i on t, if it may: false if not.
func (m *machine) check(t *state, c, i int) bool {
	tc := &t.clients[c]
	bit := uint8(1) << i
	if tc.unadmitted&bit == 0 || tc.admitting&bit != 0 || tc.adm.conflict || (!m.solo && tc.pendings >= m.cfg.Pendings) {
		return false
	}
	tc.pendings++
	tc.admitting |= bit
	req := script.PendingRequest(script.PendingArgs{ID: pendingID(c, tc.pendings), Settings: m.sigma[c], Quarantine: m.quar[c],
		TTL: 2*m.quar[c] + time.Second, Replace: tc.adm.seen&^bit != 0})
	t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: tc.pendings, req: req}))
	return true
}

// checked is a check's pending reply read (admission.go's check).
func (m *machine) checked(t *state, r msg) string {
	c, i := r.client, r.node
	tc := &t.clients[c]
	bit := uint8(1) << i
	p, err := script.ParsePending(r.res.([]any))
	if err != nil {
		panic(err)
	}
	end := func(why string) string { tc.admitting &^= bit; return why }
	switch {
	case p.Marker == m.sigma[c]:
		tc.adm.seen |= bit
		tc.unadmitted &^= bit
		tc.adm.conflict = false
		return end(" (admitted)")
	case p.Marker == script.Moving(m.sigma[c]):
		req := script.ReconfigureRequest(script.ReconfigureArgs{Step: script.StepFinish, To: m.sigma[c]})
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: r.attempt, req: req}))
		return " -> held off by a reconfiguration to its settings: finish"
	case p.Marker != "":
		tc.adm.conflict = true
		return end(" -> admitted under other settings: a conflict, no more checks")
	case p.Settings != m.sigma[c]:
		return end(" -> a quarantine with other settings: mismatch")
	case p.Quarantine.Left() > 0:
		return end(fmt.Sprintf(" -> quarantine not over (%v left)", p.Quarantine.Left()))
	}
	tc.adm.conf[i] = conf{active: true, seq: r.attempt, mark: p.ID}
	for j := 0; j < m.size[c]; j++ {
		if j != i {
			t.msgs = append(t.msgs, newMsg(msg{client: c, node: j, attempt: r.attempt, round: i + 1, req: script.StateRequest()}))
		}
	}
	if m.size[c] == 1 {
		return " -> quarantine over, no peers" + m.confirmed(t, c, i, false)
	}
	return " -> quarantine over: confirm, state to every peer"
}

// confirmReply is a peer's state read by client c's confirm of entry
// r.round-1.
func (m *machine) confirmReply(t *state, r msg) string {
	c, i, j := r.client, r.round-1, r.node
	f := &t.clients[c].adm.conf[i]
	if !f.active || f.seq != r.attempt {
		return " (late: ignored)"
	}
	st, err := script.ParseState(r.res.([]any))
	if err != nil {
		panic(err)
	}
	f.heard |= 1 << j
	f.peers[j] = script.ReadPeer(st, m.sigma[c])
	peers := uint8(allNodes(m.size[c])) &^ (1 << i)
	if f.peers[j] == script.PeerAdmitted || f.heard == peers {
		return m.confirmed(t, c, i, true)
	}
	return ""
}

// confirmed decides client c's confirm of entry i with the peers heard,
// by script.Confirm, and sends the admit if it admits.
func (m *machine) confirmed(t *state, c, i int, peersHeard bool) string {
	tc := &t.clients[c]
	f := tc.adm.conf[i]
	var peers []script.Peer
	for j := 0; j < m.size[c]; j++ {
		if j != i && f.heard&(1<<j) != 0 {
			peers = append(peers, f.peers[j])
		}
	}
	tc.adm.conf[i] = conf{}
	dropReads(t, c, i)
	v := script.Confirm(peers, m.size[c]-1)
	switch v {
	case script.ConfirmAdmitted, script.ConfirmFirst:
		req := script.AdmitRequest(script.AdmitArgs{ID: f.mark, Settings: m.sigma[c]})
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, attempt: f.seq, req: req}))
		if v == script.ConfirmFirst {
			return fmt.Sprintf(" -> confirm of entry %d: the first admission (every peer bare): admit (mark %s)", i, f.mark)
		}
		return fmt.Sprintf(" -> confirm of entry %d: a peer is admitted: admit (mark %s)", i, f.mark)
	}
	tc.admitting &^= 1 << i
	return fmt.Sprintf(" -> confirm of entry %d refused (%d)", i, v)
}

// dropReads takes client c's confirm reads for entry i off the wire once
// the confirm is decided: they only read (see dropLooks).
func dropReads(t *state, c, i int) {
	t.msgs = dropMsgs(t.msgs, func(q msg) bool {
		return !q.reply && q.client == c && q.req.Script == "state" && q.round == i+1
	})
}

// admitted is a check's admit reply read.
func (m *machine) admitted(t *state, r msg) string {
	tc := &t.clients[r.client]
	bit := uint8(1) << r.node
	tc.admitting &^= bit
	switch script.AdmitStatus(r.res.(int64)) {
	case script.Admitted:
		tc.unadmitted &^= bit
		tc.adm.seen |= bit
		tc.adm.conflict = false
		return " -> admitted"
	case script.AdmittedAs:
		tc.unadmitted &^= bit
		return " -> admitted meanwhile under other settings"
	}
	return " -> not admitted (the mark is gone or too young)"
}

// finished is a check's finish reply read (reconfigure.go's finish).
func (m *machine) finished(t *state, r msg) string {
	tc := &t.clients[r.client]
	bit := uint8(1) << r.node
	tc.admitting &^= bit
	rep, err := script.ParseReconfigure(r.res.([]any))
	if err != nil {
		panic(err)
	}
	switch {
	case rep.Status == script.ReconfigureDone:
		tc.unadmitted &^= bit
		tc.adm.seen |= bit
		tc.adm.conflict = false
		return " -> admitted after its hold-off"
	case rep.Status == script.ReconfigureWaiting && rep.Left > 0:
		return fmt.Sprintf(" -> hold-off not over (%v left)", rep.Left)
	case rep.Status == script.ReconfigureWaiting:
		return " -> no hold-off stamped (the command must be run again)"
	}
	return " -> not held off any more"
}
