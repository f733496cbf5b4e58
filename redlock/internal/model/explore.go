package model

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Result is what an exploration found.
type Result struct {
	States  int           // distinct states reached
	Steps   int           // transitions taken (states reached again included)
	Depth   int           // the deepest level explored
	Elapsed time.Duration // wall time
	// Complete: every state within the bounds was explored (the state
	// limit did not cut it short).
	Complete bool
	// Violation is the broken invariant, "" if none; Trace the shortest
	// run that breaks it, one line per step.
	Violation string
	Trace     []string
	// Scripts are the Lua scripts the nodes ran in the exploration, by
	// name (script.Sources), sorted.
	Scripts []string
}

func (r Result) String() string {
	s := fmt.Sprintf("%d states, %d steps, depth %d, %v", r.States, r.Steps, r.Depth, r.Elapsed.Round(time.Millisecond))
	if !r.Complete {
		s += " (cut short by the state limit)"
	}
	if r.Violation != "" {
		s += "\nCOUNTEREXAMPLE: " + r.Violation + "\n  " + strings.Join(r.Trace, "\n  ")
	}
	return s
}

type hash [16]byte

// canonical is the identity of s up to a renaming of the nodes: the
// smallest hash over the renamings that sort the nodes by what each holds
// on its own (its clock, its key space, the calls and replies on the wire
// to and from it). Such a signature does not depend on the node's name,
// so the renamings that sort a renamed state are those of s renamed, and
// the smallest hash is the same: sound symmetry reduction, and exact. It
// tries every order of nodes whose signatures tie (all of them in the
// initial state), few once the nodes differ; the nodes are
// interchangeable since every round goes to all of them and they start
// alike, so renamed states have renamed futures. Without Symmetry it is
// the plain hash.
func (m *machine) canonical(s *state) hash {
	enc := s.nodeEncodings()
	n := len(enc)
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	if !m.cfg.Symmetry {
		var h hash
		m.enc = s.encode(m.enc, id, id, enc)
		sum := sha256.Sum256(m.enc)
		copy(h[:], sum[:16])
		return h
	}
	sig := make([]string, n)
	for i := 0; i < n; i++ {
		var keys []string
		for k := range s.msgs {
			if s.msgs[k].node == i {
				keys = append(keys, s.msgs[k].key)
			}
		}
		sort.Strings(keys)
		sig[i] = strconv.Itoa(s.ahead[i]) + "|" + string(enc[i]) + "|" + strings.Join(keys, "|")
	}
	order := append([]int(nil), id...)
	sort.SliceStable(order, func(x, y int) bool { return sig[order[x]] < sig[order[y]] })
	// groups of positions whose nodes tie
	var groups [][2]int
	for j := 0; j < n; {
		k := j + 1
		for k < n && sig[order[k]] == sig[order[j]] {
			k++
		}
		groups = append(groups, [2]int{j, k})
		j = k
	}
	var h hash
	first := true
	inv := append([]int(nil), order...) // position -> node
	perm := make([]int, n)              // node -> position
	var try func(g int)
	try = func(g int) {
		if g == len(groups) {
			for j, i := range inv {
				perm[i] = j
			}
			m.enc = s.encode(m.enc, perm, inv, enc)
			sum := sha256.Sum256(m.enc)
			if first || bytes.Compare(sum[:16], h[:]) < 0 {
				copy(h[:], sum[:16])
				first = false
			}
			return
		}
		lo, hi := groups[g][0], groups[g][1]
		if hi-lo == 1 {
			try(g + 1)
			return
		}
		base := append([]int(nil), order[lo:hi]...)
		for _, p := range m.perms[hi-lo] {
			for k, q := range p {
				inv[lo+k] = base[q]
			}
			try(g + 1)
		}
		copy(inv[lo:hi], base)
	}
	try(0)
	return h
}

// seen is how a state was first reached: from which state, by which of
// its successors (the index in successors' order).
type seen struct {
	parent hash
	index  int32
}

// Explore runs every interleaving of cfg's deployment, breadth first up
// to cfg.Depth steps, each distinct state once, and stops at the first
// state that breaks an invariant, with the shortest run that reaches it.
// It returns an error for a configuration it cannot run, and stops with
// an error when a script calls a command the model does not implement
// (errUnimplemented) or fails.
func Explore(cfg Config) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			res, err = Result{}, e
		}
	}()
	m, err := newMachine(cfg)
	if err != nil {
		return Result{}, err
	}
	var workers []*machine // expanders' machines beyond m
	defer func() {
		res.Scripts = m.lua.scripts()
		for _, w := range workers {
			res.Scripts = mergeSorted(res.Scripts, w.lua.scripts())
		}
	}()
	start := time.Now()
	init := m.initial()
	prefix, init, err := m.prefix(init)
	if err != nil {
		return Result{}, err
	}
	if cfg.DFS {
		return m.exploreDFS(start, init, prefix), nil
	}
	root := m.canonical(init)
	visited := map[hash]seen{root: {index: -1}}
	frontier := []*state{init}
	hashes := []hash{root}
	res = Result{States: 1, Complete: true}
	ex, err := m.expanders(cfg.Workers)
	if err != nil {
		return Result{}, err
	}
	workers = ex.machines[1:]
	for depth := len(prefix); depth < cfg.Depth && len(frontier) > 0; depth++ {
		var next []*state
		var nextHashes []hash
		// The states of the last level are checked and counted but
		// never expanded: keeping them would only hold the largest
		// level in memory at the deepest bound.
		last := depth+1 == cfg.Depth
		for lo := 0; lo < len(frontier); lo += expandBatch {
			hi := min(lo+expandBatch, len(frontier))
			outs := ex.expand(frontier[lo:hi])
			for j, out := range outs {
				k := lo + j
				res.Steps += len(out.next)
				for i, t := range out.next {
					h := out.hash[i]
					if _, ok := visited[h]; ok {
						continue
					}
					visited[h] = seen{parent: hashes[k], index: int32(i)}
					res.States++
					if t.bad != "" {
						res.Depth = depth + 1
						res.Violation = t.bad
						res.Trace = append(prefix, m.trace(init, visited, h)...)
						res.Elapsed = time.Since(start)
						return res, nil
					}
					if !last {
						next = append(next, t)
						nextHashes = append(nextHashes, h)
					}
				}
				if cfg.MaxStates > 0 && res.States >= cfg.MaxStates {
					res.Complete = false
					res.Depth = depth + 1
					res.Elapsed = time.Since(start)
					return res, nil
				}
			}
		}
		frontier, hashes = next, nextHashes
		res.Depth = depth + 1
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// expandBatch is how many states of a level are expanded before their
// successors are merged into the visited set, in order.
const expandBatch = 1024

// expanded is one state's successors in successors' order, each with its
// invariants checked and its canonical hash.
type expanded struct {
	next []*state
	hash []hash
}

// expand computes s's successors. It stops after the first that breaks
// an invariant: the exploration ends there.
func (m *machine) expand(s *state) (out expanded) {
	bad := false
	m.successors(s, func(st step) {
		if bad {
			return
		}
		t := st.next
		if t.bad == "" {
			t.bad = m.invariants(t)
		}
		out.next = append(out.next, t)
		out.hash = append(out.hash, m.canonical(t))
		bad = t.bad != ""
	})
	return out
}

// expanders expands a level's states on several goroutines, each with a
// machine of its own (a machine runs the scripts in its own Lua state).
type expanders struct {
	machines []*machine
}

func (m *machine) expanders(n int) (*expanders, error) {
	ex := &expanders{machines: []*machine{m}}
	for len(ex.machines) < n {
		w, err := newMachine(m.cfg)
		if err != nil {
			return nil, err
		}
		ex.machines = append(ex.machines, w)
	}
	return ex, nil
}

// expand expands states in order and drops them from the slice: only
// their hashes are needed once they are expanded. A panic in a worker
// (errUnimplemented, say) is raised again on the caller's goroutine.
func (ex *expanders) expand(states []*state) []expanded {
	outs := make([]expanded, len(states))
	if len(ex.machines) == 1 {
		for k, s := range states {
			outs[k] = ex.machines[0].expand(s)
			states[k] = nil
		}
		return outs
	}
	var (
		nextIdx atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure any
	)
	for _, w := range ex.machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					if failure == nil {
						failure = r
					}
					mu.Unlock()
				}
			}()
			for {
				k := int(nextIdx.Add(1) - 1)
				if k >= len(states) {
					return
				}
				outs[k] = w.expand(states[k])
				states[k] = nil
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
	return outs
}

// mergeSorted is the sorted union of two sorted lists of names.
func mergeSorted(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// invariants checks the invariants that read a state (the token
// invariants are checked where a token is committed, in tallyCommit): no
// two leases trusted at once, and no lease trusted beyond its keys. With
// ClockJumps (assumption 1 lifted) neither holds, and neither is checked.
func (m *machine) invariants(s *state) string {
	if m.cfg.ClockJumps {
		return ""
	}
	if bad := m.exclusion(s); bad != "" {
		return bad
	}
	if bad := m.keys(s); bad != "" && !m.cfg.ExclusionOnly {
		return bad
	}
	if m.cfg.Live {
		if bad := m.liveness(s); bad != "" {
			return bad
		}
	}
	if m.cfg.LiveReconfig {
		return m.reconfigLiveness(s)
	}
	return ""
}

// liveness is the bounded liveness check: in a state where no client
// holds a lease or has an attempt out, no acquire call is on the wire
// and every node is admitted, a client with an attempt left gets a lease
// with no fault injected: time passes (every clock at real time's rate)
// until no node holds the key, at most max ttl + 1 ticks, then its
// attempt alone runs on every node in turn, each reply heard at once,
// and its commit round likewise. The bound is k = that wait + 1 + 2n
// steps; a key no lease can still justify that outlives the wait, or an
// attempt that fails, breaks it.
func (m *machine) liveness(s *state) string {
	idler := -1
	for c, cl := range s.clients {
		switch cl.phase {
		case acquiring, committing, holding:
			return ""
		case idle:
			if cl.attempt < m.cfg.Clients[c].Attempts && idler < 0 {
				idler = c
			}
		}
	}
	if idler < 0 {
		return ""
	}
	for _, q := range s.msgs {
		if !q.reply && q.req.Script == "acquire" {
			return ""
		}
	}
	for e := 0; e < m.size[idler]; e++ {
		mk := s.nodes[m.serverOf(idler, e)][script.MarkerKey]
		if mk == nil || mk.str != m.sigma[idler] {
			return ""
		}
	}
	t := s.clone()
	t.msgs = nil
	wait := 0
	maxTTL := 0
	for _, cc := range m.cfg.Clients {
		maxTTL = max(maxTTL, int(cc.MaxTTL/Unit))
	}
	for {
		held := false
		for i := range t.nodes {
			if e := t.nodes[i][lockKey]; e != nil && (e.exp == 0 || t.nodeNow(i) < e.exp) {
				held = true
			}
		}
		if !held {
			break
		}
		if wait > maxTTL {
			return fmt.Sprintf("liveness: at real time %d no client holds a lease, yet a node still holds the key %d ticks later", s.T, wait)
		}
		t.T++
		wait++
	}
	c := idler
	var start *state
	m.clientSteps(t, c, func(st step) {
		if start == nil && st.next.clients[c].phase == acquiring {
			start = st.next
		}
	})
	if start == nil {
		return fmt.Sprintf("liveness: client %d cannot start an attempt", c)
	}
	t = start
	for round := 0; round < 2 && t.clients[c].phase != holding; round++ {
		for i := 0; i < m.size[c] && t.clients[c].phase != holding; i++ {
			for k, q := range t.msgs {
				if q.reply || q.client != c || q.node != i || q.attempt != t.clients[c].attempt {
					continue
				}
				srv := m.serverIn(t, q)
				ks := t.nodes[srv].clone()
				res := m.exec(ks, t.nodeNow(srv), q.req)
				t.nodes[srv] = ks
				t.msgs = append(t.msgs[:k:k], t.msgs[k+1:]...)
				if m.reads(t, q, res) {
					m.deliver(t, newMsg(msg2reply(q, res)))
				}
				break
			}
		}
	}
	if t.clients[c].phase != holding {
		return fmt.Sprintf("liveness: at real time %d the key is free, yet client %d's attempt alone, with no fault, got no lease (it is %v)", s.T+wait, c, t.clients[c].phase)
	}
	return ""
}

// keys is "a lease never outlives the keys that justify it": while a
// client trusts a lease, a majority of the nodes still hold its value,
// unexpired on their clocks, except nodes that lost their data since
// its attempt began (the restart quarantine answers for those: Theorem 3).
func (m *machine) keys(s *state) string {
	n := m.cfg.Nodes
	for c, cl := range s.clients {
		if cl.phase != holding || time.Duration(s.clientNow(n, c))*Unit >= cl.deadline {
			continue
		}
		v := value(c, cl.attempt)
		held := cl.wiped
		for i := 0; i < n; i++ {
			// Not keyspace.live, which deletes an expired key: states
			// share key spaces.
			if e := s.nodes[i][lockKey]; e != nil && (e.exp == 0 || s.nodeNow(i) < e.exp) && e.kind == 's' && e.str == v {
				held |= 1 << i
			}
		}
		if count(held) < m.qc[c] {
			return fmt.Sprintf("a lease outlives its keys at real time %d: client %d trusts %s until %v on its clock, which reads %d, but only %d nodes hold it",
				s.T, c, v, cl.deadline, s.clientNow(n, c), count(held))
		}
	}
	return ""
}

// exclusion is the mutual-exclusion invariant: no two clients trust a
// lease at the same model time (each by its own clock: a holder trusts
// its lease while its clock is before the deadline), and no lease is
// trusted again after another one was trusted while it had lapsed: its
// holder would see one stretch of trust across the other holder's (a
// lease that lapsed and is trusted again is what an extend that
// re-creates keys could bring about). It notes on s which lapsed leases
// another one overtook.
func (m *machine) exclusion(s *state) string {
	var who []string
	trusts := make([]bool, len(s.clients))
	for c, cl := range s.clients {
		if cl.phase == holding && time.Duration(s.clientNow(m.cfg.Nodes, c))*Unit < cl.deadline {
			trusts[c] = true
			who = append(who, fmt.Sprintf("client %d (%s, until %v on its clock, which reads %d)", c,
				value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c)))
		}
	}
	if len(who) > 1 {
		return fmt.Sprintf("double grant at real time %d: %s", s.T, strings.Join(who, " and "))
	}
	for c := range s.clients {
		cl := &s.clients[c]
		if trusts[c] && cl.overtaken {
			return fmt.Sprintf("double grant across a lapse at real time %d: client %d trusts %s again (until %v on its clock, which reads %d), after another lease was trusted while it had lapsed",
				s.T, c, value(c, cl.attempt), cl.deadline, s.clientNow(m.cfg.Nodes, c))
		}
		if cl.phase == holding && !trusts[c] && len(who) > 0 {
			cl.overtaken = true
		}
	}
	return ""
}

// prefix takes Config.Prefix's steps from init: their words, numbered,
// and the state they reach.
func (m *machine) prefix(init *state) ([]string, *state, error) {
	var out []string
	s := init
	for k, p := range m.cfg.Prefix {
		var took *step
		m.successors(s, func(st step) {
			if took == nil && strings.Contains(st.text(), p) {
				took = &st
			}
		})
		if took == nil {
			return nil, nil, fmt.Errorf("model: prefix step %d: no step %q", k+1, p)
		}
		s = took.next
		if bad := m.invariants(s); bad != "" {
			return nil, nil, fmt.Errorf("model: prefix step %d breaks an invariant: %s", k+1, bad)
		}
		out = append(out, fmt.Sprintf("%2d. %s (prefix)", k+1, took.text()))
	}
	return out, s, nil
}

// trace rebuilds the run to the state h: the chain of first arrivals,
// replayed from the initial state to recover each step's words.
func (m *machine) trace(init *state, visited map[hash]seen, h hash) []string {
	var idx []int32
	for {
		sn := visited[h]
		if sn.index < 0 {
			break
		}
		idx = append(idx, sn.index)
		h = sn.parent
	}
	var out []string
	s := init
	for k := len(idx) - 1; k >= 0; k-- {
		var i int32
		var took step
		m.successors(s, func(st step) {
			if i == idx[k] {
				took = st
			}
			i++
		})
		out = append(out, fmt.Sprintf("%2d. %s", len(out)+1+len(m.cfg.Prefix), took.text()))
		s = took.next
	}
	return out
}

// exploreDFS is Explore depth first: it reaches deep counterexamples
// long before a breadth-first search would, though not the shortest one.
// A state is explored again when it is reached with more steps left
// than before, so the bound means the same as breadth first.
func (m *machine) exploreDFS(start time.Time, init *state, prefix []string) Result {
	cfg := m.cfg
	res := Result{Complete: true}
	left := map[hash]int{}
	var path []step
	var bad string
	var visit func(s *state, h hash, budget int) bool
	visit = func(s *state, h hash, budget int) bool {
		if len(path)+len(prefix) > res.Depth {
			res.Depth = len(path) + len(prefix)
		}
		if budget == 0 {
			return false
		}
		if cfg.MaxStates > 0 && res.States >= cfg.MaxStates {
			res.Complete = false
			return true
		}
		var kids []step
		m.successors(s, func(st step) { kids = append(kids, st) })
		for _, st := range kids {
			res.Steps++
			t := st.next
			if t.bad == "" {
				t.bad = m.invariants(t)
			}
			g := m.canonical(t)
			if b, ok := left[g]; ok && b >= budget-1 {
				continue
			} else if !ok {
				res.States++
			}
			left[g] = budget - 1
			path = append(path, st)
			if t.bad != "" {
				bad = t.bad
				return true
			}
			if visit(t, g, budget-1) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	root := m.canonical(init)
	left[root] = cfg.Depth - len(prefix)
	res.States = 1
	visit(init, root, cfg.Depth-len(prefix))
	if bad != "" {
		res.Violation = bad
		res.Trace = prefix
		for i, st := range path {
			res.Trace = append(res.Trace, fmt.Sprintf("%2d. %s", i+1+len(prefix), st.text()))
		}
		res.Depth = len(path) + len(prefix)
	}
	res.Elapsed = time.Since(start)
	return res
}
