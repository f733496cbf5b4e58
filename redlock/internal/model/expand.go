package model

import (
	"sync"
	"sync/atomic"
)

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
