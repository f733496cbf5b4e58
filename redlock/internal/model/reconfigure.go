package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The operator runs Client.Reconfigure (redlock/reconfigure.go;
// docs/reconfiguration.md, "Changing the settings of a live deployment") up to
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
