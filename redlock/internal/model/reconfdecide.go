package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// reconfDecide is the run going on from its current step with the
// replies heard (every one, or at the timeout those that came).
func (m *machine) reconfDecide(t *state) string {
	tr := &t.reconf
	k := tr.run
	ls := m.lists(k)
	need := script.ReconfigureNeed(len(ls[0]))
	dropLooks(t)
	end := func(res runResult, why string) string {
		tr.phase, tr.last = rIdle, res
		return " -> " + why
	}
	if tr.phase == rLooking && m.cfg.Reconfigs[k].ReadFrom {
		tr.looked = tr.heard
		if why := m.readFrom(tr, ls[0], need); why != "" {
			if strings.Contains(why, "refused") {
				return end(runRefused, why)
			}
			return end(runFailed, why)
		}
	}
	from, to, holdOff := m.fromTo(k, tr.read)
	rec := script.ChangeRecord(from, to, m.ids(ls[1]))
	if m.cfg.RecordWithoutNodes {
		rec = script.ChangeRecord(from, to, nil)
	}
	// send calls step s[side] on the entries in sets[side]; a retire on
	// an old node that stays is a refuse.
	send := func(sets [2]uint8, s [2]script.ReconfigureStep) {
		tr.sent, tr.heard = sets, [2]uint8{}
		for side, list := range ls {
			for e, node := range list {
				if sets[side]&(1<<e) == 0 {
					continue
				}
				st := s[side]
				if st == script.StepRetire && m.stays(ls[1], tr.looked[1], node) {
					st = script.StepRefuse
				}
				req := script.ReconfigureRequest(script.ReconfigureArgs{Step: st, From: from, To: to, Record: rec, HoldOff: holdOff,
					TTL: 2*holdOff + time.Second, ID: "h" + strconv.Itoa(tr.runs)})
				round := side*maxNodes + e
				if st == script.StepHold {
					round += 2 * maxNodes
				}
				t.msgs = append(t.msgs, newMsg(msg{client: reconfID, node: node, attempt: tr.runs, round: round, req: req}))
			}
		}
	}
	switch tr.phase {
	case rLooking:
		tr.looked = tr.heard
		var ids [2][]string
		for side, list := range ls {
			for e, node := range list {
				id := ""
				if tr.looked[side]&(1<<e) != 0 {
					if !m.movable(tr.marker[side][e], tr.trace[side][e], from, to, rec) {
						return end(runRefused, fmt.Sprintf("node %d carries %q: refused, nothing written", node, tr.marker[side][e]))
					}
					id = strconv.Itoa(node)
				}
				ids[side] = append(ids[side], id)
			}
		}
		if tr.looked[1] != allNodes(len(ls[1])) {
			return end(runFailed, "a new node did not answer, and every one must: incomplete, nothing written")
		}
		if count(tr.looked[0]) < need {
			return end(runFailed, fmt.Sprintf("%d old nodes answered, %d must: incomplete, nothing written", count(tr.looked[0]), need))
		}
		if from == to {
			if script.ReconfigureUnchanged(from, to, ids[0], ids[1]) {
				return end(runNothing, "old and new are the same: nil (nothing to change)")
			}
			return end(runRefused, "the same settings for another node list: refused, nothing written")
		}
		if tr.looked[0] == allNodes(len(ls[0])) && m.changeFinished(tr, ls, from, to) {
			return end(runDone, "already done: nil, nothing written")
		}
		tr.phase, tr.acked, tr.joined = rRefusing, 0, 0
		joining := m.joining(ls)
		if m.cfg.NoJoinMarks {
			joining = 0
		}
		send([2]uint8{tr.looked[0], joining}, [2]script.ReconfigureStep{script.StepRetire, script.StepRefuse})
		return fmt.Sprintf(" -> step 1: refuse or retire on old nodes %v, mark new nodes %v", m.nodesOf(ls[0], tr.looked[0]), m.nodesOf(ls[1], joining))
	case rRefusing:
		marked := 0
		for e, node := range ls[1] {
			if tr.joined&(1<<e) != 0 || m.ackedOld(ls[0], tr.acked, node) {
				marked++
			}
		}
		if count(tr.acked) < need || (marked < quorum.Majority(len(ls[1])) && !m.cfg.NoJoinMarks) {
			return end(runFailed, fmt.Sprintf("step 1 reached %d old nodes (%d must) and %d new ones: incomplete", count(tr.acked), need, marked))
		}
		// The command says so: clients of the new settings may start.
		tr.wrote |= 1 << k
		tr.phase = rHolding
		send([2]uint8{0, tr.looked[1]}, [2]script.ReconfigureStep{"", script.StepHold})
		return fmt.Sprintf(" -> step 2: hold on new nodes %v", m.nodesOf(ls[1], tr.looked[1]))
	case rHolding:
		if tr.heard[1] == allNodes(len(ls[1])) && tr.looked[0] == allNodes(len(ls[0])) && tr.acked == tr.looked[0] {
			return end(runDone, "every node did its step: nil once the hold-off is over")
		}
		return end(runFailed, "incomplete")
	}
	return ""
}

// changeFinished is script.ReconfigureFinished over the look's markers (or,
// with FinishedOnMarks, the rule that also takes a node only marked
// "reconfiguring to" the new settings for done).
func (m *machine) changeFinished(tr *reconfigurer, ls [2][]int, from, to string) bool {
	var news, leaving []string
	for e := range ls[1] {
		mk := tr.marker[1][e]
		if m.cfg.FinishedOnMarks && mk == script.Moving(to) {
			mk = to
		}
		news = append(news, mk)
	}
	for e, node := range ls[0] {
		if !m.stays(ls[1], tr.looked[1], node) {
			leaving = append(leaving, tr.marker[0][e])
		}
	}
	return script.ReconfigureFinished(from, to, news, leaving)
}

// movable is step 0's rule, script.ReconfigureMovable, or with
// NoChangeRecord the rule before change records.
func (m *machine) movable(marker, trace, from, to, rec string) bool {
	if !m.cfg.NoChangeRecord {
		return script.ReconfigureMovable(marker, trace, from, to, rec)
	}
	_, moving := script.MovingTo(marker)
	if marker == to && to != from {
		ch, ok := script.ParseChange(trace)
		return ok && ch.From == from
	}
	return marker == "" || marker == from || moving || strings.HasPrefix(marker, "retired, ")
}

// ids are the identities of the nodes of list, for the change record:
// the model's identity of a node is its index.
func (m *machine) ids(list []int) []string {
	out := make([]string, len(list))
	for e, n := range list {
		out[e] = strconv.Itoa(n)
	}
	return out
}

// joining are the entries of the new list whose nodes are not old ones:
// step 1 marks them (reconfigure.go's joined).
func (m *machine) joining(ls [2][]int) uint8 {
	var set uint8
	for e, n := range ls[1] {
		if !slices.Contains(ls[0], n) {
			set |= 1 << e
		}
	}
	return set
}

// ackedOld reports whether node is an old node that took its step-1 mark.
func (m *machine) ackedOld(olds []int, acked uint8, node int) bool {
	for e, n := range olds {
		if n == node && acked&(1<<e) != 0 {
			return true
		}
	}
	return false
}

// stays reports whether node is in the new list among the entries that
// answered the look (reconfigure.go's stays).
func (m *machine) stays(news []int, looked uint8, node int) bool {
	for e, n := range news {
		if n == node && looked&(1<<e) != 0 {
			return true
		}
	}
	return false
}

func (m *machine) nodesOf(list []int, set uint8) []int {
	var out []int
	for e, n := range list {
		if set&(1<<e) != 0 {
			out = append(out, n)
		}
	}
	return out
}
