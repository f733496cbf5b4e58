package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
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

// mergeSorted is the sorted union of two sorted lists of names.
func mergeSorted(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
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
