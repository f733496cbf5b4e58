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

// The operator runs Client.Reconfigure (redlock/reconfigure.go;
// docs/fencing.md, "Changing the settings of a live deployment") up to
// Config.ReconfigRuns times, one run at a time, each with arguments drawn
// from Config.Reconfigs (a rerun is the same run again; a stale or
// mistaken one another entry, with wrong old settings or another node
// list). A run is the library's, step by step, each step a separate
// action after which the run may stop for good (a crash, Ctrl-C, ctx):
//
//  0. the look: the state script and a GET of the change record on every
//     node of both lists (one step per node: the library's three reads,
//     ident, state and trace, run as one); each reply at once, later or
//     never; the run decides once every node answered or at its timeout
//     (any moment), the nodes not heard being down, with the library's
//     rules script.ChangeRecord, script.ReconfigureMovable,
//     script.ReconfigureNeed and script.ReconfigureUnchanged (a node's
//     identity is the node itself: the lists name distinct nodes);
//  1. refuse (a node that stays) or retire on every old node that
//     answered the look, and refuse on every new node that is not an old
//     one; the run goes on once every call was answered or at its
//     timeout, if enough old nodes and a majority of the new ones took
//     their marks, and says so: clients of the new settings may start
//     from then on (ClientConfig.AfterReconfigure);
//  2. hold on every new node; the run ends once every call was answered
//     or at its timeout.
//
// The command's own finish loop is left out: it sends the finish step
// that every client of the new settings sends when it meets a held-off
// node (confirm.go), with the same effect on the node.

// reconfID is the client index of the reconfiguration's messages; their
// node is the node itself, and their round the list (old 0, new 1) times
// maxNodes plus the entry, plus 2·maxNodes for step 2's.
const reconfID = -2

// Reconfig is one Client.Reconfigure call: the old node list and old
// settings as the operator typed them (From, MaxTTL, Factor: its nodes
// and --from-* flags), called on client To (its node list and settings
// are the new ones).
type Reconfig struct {
	From   []int
	MaxTTL time.Duration
	Factor float64
	To     int
	// ReadFrom: the operator gives no old settings, and the run reads
	// them at its look (script.ReconfigureOldSettingsOf), as the library
	// does without old options; MaxTTL and Factor are not used. Every
	// settings string a node may carry must be one of the scenario's
	// clients' or runs' (knownSettings).
	ReadFrom bool
}

type reconfPhase byte

const (
	rIdle     reconfPhase = iota
	rLooking              // step 0's reads are out
	rRefusing             // step 1 is out
	rHolding              // step 2 is out
)

// runResult is what the last run returned.
type runResult byte

const (
	runNone    runResult = iota // none returned (none ran, or it stopped)
	runFailed                   // an error
	runDone                     // nil: every node of both lists did its step
	runNothing                  // nil: "nothing to change"
	runRefused                  // an error: the nodes' records refuse the arguments, nothing written
)

// reconfigurer is the state of the operator's Reconfigure runs. Entry sets
// are per list: [0] the old list, [1] the new one.
type reconfigurer struct {
	phase  reconfPhase
	runs   int // runs started
	run    int // the current (or last) run's index in Config.Reconfigs
	wrote  uint16
	last   runResult
	looked [2]uint8 // the entries that answered the look
	sent   [2]uint8 // the entries called in the current step
	heard  [2]uint8 // the entries heard in the current step
	acked  uint8    // step 1: old entries that took their mark
	joined uint8    // step 1: new entries (not old nodes) that took theirs
	marker [2][maxNodes]string
	trace  [2][maxNodes]string
	read   string // with Reconfig.ReadFrom: the old settings the look read ("" before)
}

func (r *reconfigurer) encode(b []byte) []byte {
	// As fmt.Appendf("R%d,%d,%d,%d,%d,%v%v%v%d,%d,%q,") would write it,
	// without fmt's cost on every step.
	b = append(b, 'R')
	for _, v := range [...]int64{int64(r.phase), int64(r.runs), int64(r.run), int64(r.wrote), int64(r.last)} {
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ',')
	}
	for _, set := range [...][2]uint8{r.looked, r.sent, r.heard} {
		b = append(b, '[')
		b = strconv.AppendUint(b, uint64(set[0]), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(set[1]), 10)
		b = append(b, ']')
	}
	b = strconv.AppendUint(b, uint64(r.acked), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(r.joined), 10)
	b = append(b, ',')
	b = strconv.AppendQuote(b, r.read)
	b = append(b, ',')
	if r.phase == rLooking {
		b = fmt.Appendf(b, "%q%q", r.marker, r.trace)
	}
	return append(b, '|')
}

// lists are run k's old and new lists (nodes).
func (m *machine) lists(k int) [2][]int {
	rc := m.cfg.Reconfigs[k]
	var news []int
	for e := 0; e < m.size[rc.To]; e++ {
		news = append(news, m.serverOf(rc.To, e))
	}
	return [2][]int{rc.From, news}
}

// fromTo are run k's old and new settings, and its hold-off; read is
// what its look read of the old settings (a run with ReadFrom: "" until
// then, and the hold-off is the new settings' quarantine).
func (m *machine) fromTo(k int, read string) (from, to string, holdOff time.Duration) {
	rc := m.cfg.Reconfigs[k]
	if rc.ReadFrom {
		return read, m.sigma[rc.To], max(m.known[read].quar, m.quar[rc.To])
	}
	old := ClientConfig{MaxTTL: rc.MaxTTL, Factor: rc.Factor}
	q, err := script.CheckedQuarantine(rc.MaxTTL, rc.Factor)
	if err != nil {
		panic(err)
	}
	return old.settings(len(rc.From)), m.sigma[rc.To], max(q, m.quar[rc.To])
}

// known is a settings string the scenario uses: its quarantine and node
// count, for a run that reads the old settings.
type known struct {
	quar  time.Duration
	nodes int
}

// knownSettings are the settings of the scenario's clients and runs.
func knownSettings(cfg Config) (map[string]known, error) {
	out := map[string]known{}
	add := func(cc ClientConfig, nodes int) error {
		q, err := script.CheckedQuarantine(cc.MaxTTL, cc.Factor)
		if err != nil {
			return err
		}
		out[cc.settings(nodes)] = known{q, nodes}
		return nil
	}
	for _, cc := range cfg.Clients {
		if err := add(cc, cc.entries(cfg.Nodes)); err != nil {
			return nil, err
		}
	}
	for _, rc := range cfg.Reconfigs {
		if rc.ReadFrom {
			continue
		}
		if err := add(ClientConfig{MaxTTL: rc.MaxTTL, Factor: rc.Factor}, len(rc.From)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// started reports whether client c may take steps: one started after a
// reconfiguration only once a run to its settings said step 1 was done.
func (m *machine) started(s *state, c int) bool {
	if !m.cfg.Clients[c].AfterReconfigure {
		return true
	}
	for k := range m.cfg.Reconfigs {
		if s.reconf.wrote&(1<<k) != 0 && m.sigma[m.cfg.Reconfigs[k].To] == m.sigma[c] {
			return true
		}
	}
	return false
}

// reconfSteps are the operator's own steps: start a run (one per entry of
// Reconfigs), or, with a run under way, its timeout or its stop.
func (m *machine) reconfSteps(s *state, emit func(step)) {
	r := s.reconf
	if r.phase == rIdle {
		if r.runs >= m.cfg.ReconfigRuns {
			return
		}
		for k := range m.cfg.Reconfigs {
			if m.cfg.ReconfigInOrder && k != r.runs {
				continue
			}
			t := s.clone()
			tr := &t.reconf
			tr.runs++
			tr.run, tr.phase, tr.last = k, rLooking, runNone
			tr.looked, tr.sent, tr.heard, tr.acked, tr.joined = [2]uint8{}, [2]uint8{}, [2]uint8{}, 0, 0
			tr.marker, tr.trace = [2][maxNodes]string{}, [2][maxNodes]string{}
			ls := m.lists(k)
			for side, list := range ls {
				tr.sent[side] = allNodes(len(list))
				for e, node := range list {
					t.msgs = append(t.msgs, newMsg(msg{client: reconfID, node: node, attempt: tr.runs, round: side*maxNodes + e,
						req: script.Request{Script: lookScript, Keys: []string{script.MarkerKey, script.PendingKey, script.TraceKey}}}))
				}
			}
			emit(step{func() string {
				from, to, h := m.fromTo(k, "")
				if m.cfg.Reconfigs[k].ReadFrom {
					return fmt.Sprintf("the operator runs Reconfigure (run %d) from %v, old settings read from the nodes, to %v %q: look at every node", tr.runs, ls[0], ls[1], to)
				}
				return fmt.Sprintf("the operator runs Reconfigure (run %d) from %v %q to %v %q (hold-off %v): look at every node", tr.runs, ls[0], from, ls[1], to, h)
			}, t})
		}
		return
	}
	t := s.clone()
	what := m.reconfDecide(t)
	emit(step{func() string { return fmt.Sprintf("Reconfigure run %d's %s times out%s", r.runs, r.phase, what) }, t})
	t = s.clone()
	t.reconf.phase = rIdle
	dropLooks(t)
	emit(step{func() string {
		return fmt.Sprintf("Reconfigure run %d stops (Ctrl-C, a crash) during its %s", r.runs, r.phase)
	}, t})
}

func (p reconfPhase) String() string {
	return [...]string{"idle", "look", "step 1", "step 2"}[p]
}

// lookScript is step 0's reading of a node, the model's own call: the
// state script and the trace key (see run).
const lookScript = "look"

// reconfReads reports whether the run reads the reply to q (see reads).
func (m *machine) reconfReads(s *state, q msg) bool {
	r := s.reconf
	if q.attempt != r.runs {
		return false
	}
	switch r.phase {
	case rLooking:
		return q.req.Script == lookScript
	case rRefusing:
		return q.req.Script == "reconfigure" && q.round < 2*maxNodes
	case rHolding:
		return q.req.Script == "reconfigure" && q.round >= 2*maxNodes
	}
	return false
}

// deliverReconf hands a reply to the operator's run.
func (m *machine) deliverReconf(t *state, r msg) string {
	tr := &t.reconf
	if !m.reconfReads(t, r) {
		return " (late: ignored)"
	}
	side, e := r.round/maxNodes%2, r.round%maxNodes
	bit := uint8(1) << e
	tr.heard[side] |= bit
	switch tr.phase {
	case rLooking:
		res := r.res.([]any)
		st, err := script.ParseState(res[0].([]any))
		if err != nil {
			panic(err)
		}
		tr.marker[side][e] = st.Marker
		tr.trace[side][e] = res[1].(string)
	case rRefusing:
		rep, err := script.ParseReconfigure(r.res.([]any))
		if err != nil {
			panic(err)
		}
		if rep.Status != script.ReconfigureOther {
			if side == 0 {
				tr.acked |= bit
			} else {
				tr.joined |= bit
			}
		}
	}
	if tr.heard != tr.sent {
		return ""
	}
	return m.reconfDecide(t)
}

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

// readFrom is the look's reading of the old settings for a run with
// ReadFrom (redlock's oldFromLooks): enough old nodes answered, those that
// say anything (script.ReconfigureOldSettingsOf) say the same, for as many
// nodes as the old list has. It sets tr.read, or says why the run fails.
func (m *machine) readFrom(tr *reconfigurer, olds []int, need int) string {
	if count(tr.looked[0]) < need {
		return fmt.Sprintf("%d old nodes answered, %d must: incomplete, nothing written", count(tr.looked[0]), need)
	}
	to := m.sigma[m.cfg.Reconfigs[tr.run].To]
	read := ""
	for e := range olds {
		if tr.looked[0]&(1<<e) == 0 {
			continue
		}
		v := script.ReconfigureOldSettingsOf(tr.marker[0][e], tr.trace[0][e], to)
		if m.cfg.OldFromMarks {
			v = settingsNamedBy(tr.marker[0][e])
		}
		switch {
		case v == "":
		case read == "":
			read = v
		case v != read:
			return fmt.Sprintf("the old nodes record %q and %q: refused, nothing written", read, v)
		}
	}
	kn, ok := m.known[read]
	switch {
	case read == "":
		return "no old node that answered records its settings: refused, nothing written"
	case !ok:
		panic(fmt.Sprintf("model: a node carries %q, which no client or run of the scenario has", read))
	case kn.nodes != len(olds):
		return fmt.Sprintf("the old nodes were admitted with %d nodes, %d given: refused, nothing written", kn.nodes, len(olds))
	}
	tr.read = read
	return ""
}

// settingsNamedBy is the settings a marker names, a change's marks read
// as the settings they move to (Config.OldFromMarks).
func settingsNamedBy(marker string) string {
	if to, ok := script.MovingTo(marker); ok {
		return to
	}
	if to, ok := script.RetiredTo(marker); ok {
		return to
	}
	return marker
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

// dropLooks takes the looks still on the wire off it once the run no
// longer reads them: a look only reads, so running it later would change
// nothing but the wire (a reduction, as reads does for replies).
func dropLooks(t *state) {
	t.msgs = dropMsgs(t.msgs, func(q msg) bool { return !q.reply && q.client == reconfID && q.req.Script == lookScript })
}

// dropMsgs returns msgs without those drop names, in a new slice.
func dropMsgs(msgs []msg, drop func(msg) bool) []msg {
	out := make([]msg, 0, len(msgs))
	for _, q := range msgs {
		if !drop(q) {
			out = append(out, q)
		}
	}
	return out
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

// look runs step 0's reading on a node's key space: the state script and
// the trace key's value.
func (m *machine) look(ks keyspace, now int64) any {
	st := m.lua.run(ks, now, script.StateRequest())
	trace, _ := ks.exec(now, "GET", []string{script.TraceKey}).(string)
	return []any{st, trace}
}

// checkReconfigs refuses runs the model cannot run faithfully.
func (cfg *Config) checkReconfigs() error {
	if cfg.ReconfigRuns < 0 || len(cfg.Reconfigs) > 16 {
		return fmt.Errorf("model: ReconfigRuns negative, or more than 16 Reconfigs")
	}
	if cfg.BootClient < 0 || cfg.BootClient >= len(cfg.Clients) {
		return fmt.Errorf("model: BootClient %d is no client", cfg.BootClient)
	}
	for k, rc := range cfg.Reconfigs {
		if rc.To < 0 || rc.To >= len(cfg.Clients) || len(rc.From) == 0 {
			return fmt.Errorf("model: reconfiguration %d: no old nodes, or To %d is no client", k, rc.To)
		}
		if cfg.Symmetry {
			return fmt.Errorf("model: reconfigurations name nodes: turn Symmetry off")
		}
		seen := map[int]bool{}
		for _, n := range rc.From {
			if n < 0 || n >= cfg.Nodes || seen[n] {
				return fmt.Errorf("model: reconfiguration %d: old nodes %v must be distinct nodes", k, rc.From)
			}
			seen[n] = true
		}
		if _, err := script.CheckedQuarantine(rc.MaxTTL, rc.Factor); err != nil && !rc.ReadFrom {
			return fmt.Errorf("model: reconfiguration %d: %w", k, err)
		}
	}
	return nil
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
