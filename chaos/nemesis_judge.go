package chaos

import "fmt"

// NemesisWorker is what one of the nemesis's clients did.
type NemesisWorker struct {
	Worker        int    `json:"worker"`
	Client        string `json:"client"`
	Refused       bool   `json:"expect_refused"`                            // its settings disagree with the deployment's
	Aliased       bool   `json:"expect_refused_once_named_twice,omitempty"` // it lists node 0 twice: refused once the second name answers
	Polling       bool   `json:"polling"`                                   // it polls TryLock: grants not required
	Granted       int    `json:"granted"`                                   // leases it got
	Accepted      int    `json:"accepted"`
	Refusals      int    `json:"refusals"` // lock calls refused with a *redlock.ConfigError
	RefusalError  string `json:"refusal_error,omitempty"`
	OtherFailures int    `json:"other_failures"` // lock calls that failed otherwise
	Panics        int    `json:"panics,omitempty"`
	AfterPanic    int    `json:"granted_after_panic,omitempty"`
	Extends       int    `json:"extends,omitempty"`
	ExtendErrors  int    `json:"extend_errors,omitempty"`
	LastError     string `json:"last_error,omitempty"`
}

// judgeNemesis checks what the expectations cannot say: the safety
// measures beyond overlaps and lost updates, that every misconfigured
// client was refused with a clear error and never got a lock, and that
// the well-configured ones kept working (also after a panic in fn).
func judgeNemesis(e *env, r *Result, h *history, stats []*workerStats) []string {
	var bad []string
	if e.fault != nil && e.fault.noQuarantine {
		// The lock is broken on purpose: report, judge nothing but the
		// expectations.
		r.Nemesis = nemesisWorkers(h, stats, nemesisClients)
		return nil
	}
	bad = append(bad, safetyVerdicts(r)...)
	return append(bad, judgeWorkers(e, r, h, stats, nemesisClients, func(w int, c nemesisClient, st *workerStats, nw NemesisWorker) string {
		switch {
		case c.aliased && nw.Refusals == 0:
			return fmt.Sprintf("worker %d (%s) was never refused once its second name for node 0 answered (last error: %s)", w, c.name, st.LastError)
		case c.aliased:
		case c.refused && nw.Granted > 0:
			return fmt.Sprintf("worker %d (%s) has settings the deployment refuses, yet got %d leases", w, c.name, nw.Granted)
		case c.refused && nw.Refusals == 0:
			return fmt.Sprintf("worker %d (%s) was never refused with a *redlock.ConfigError (last error: %s)", w, c.name, st.LastError)
		case !c.refused && nw.Refusals > 0:
			return fmt.Sprintf("worker %d (%s) has the deployment's settings, yet was refused %d times: %s", w, c.name, nw.Refusals, st.RefusedError)
		case !c.refused && nw.Granted == 0 && !c.polls:
			return fmt.Sprintf("worker %d (%s) never got the lock (last error: %s)", w, c.name, st.LastError)
		}
		return ""
	})...)
}

// judgeWorkers reports what each of a nemesis's workers did
// (r.Nemesis), and judges each: a worker that left no statistics, what
// check says of it ("" for nothing wrong), and what its style requires
// (styleVerdicts).
func judgeWorkers(e *env, r *Result, h *history, stats []*workerStats, clients []nemesisClient,
	check func(w int, c nemesisClient, st *workerStats, nw NemesisWorker) string) []string {
	var bad []string
	r.Nemesis = nemesisWorkers(h, stats, clients)
	for w, nw := range r.Nemesis {
		c, st := clients[w%len(clients)], stats[w]
		if st == nil {
			bad = append(bad, fmt.Sprintf("worker %d (%s) left no statistics", w, c.name))
			continue
		}
		if why := check(w, c, st, nw); why != "" {
			bad = append(bad, why)
		}
		bad = append(bad, styleVerdicts(e.cfgs[w].Style, w, c.name, nw)...)
	}
	return bad
}

// safetyVerdicts are what no nemesis run may show: overlaps of valid
// windows, and tokens that went backwards at the grant or the resource.
func safetyVerdicts(r *Result) []string {
	var bad []string
	if r.ValidOverlaps != 0 {
		bad = append(bad, fmt.Sprintf("%d overlaps of valid lease windows, want 0", r.ValidOverlaps))
	}
	if r.GrantInversions != 0 {
		bad = append(bad, fmt.Sprintf("%d grants with a fencing token not above an earlier grant's, want 0", r.GrantInversions))
	}
	if r.TokenInversions != 0 {
		bad = append(bad, fmt.Sprintf("%d writes accepted with an older token, want 0", r.TokenInversions))
	}
	return bad
}

// styleVerdicts are what worker w, of the given style, must have done:
// been granted again after a panic in fn, or called Extend from fn.
func styleVerdicts(style string, w int, name string, nw NemesisWorker) []string {
	switch {
	case style == styleDoPanic && (nw.Panics == 0 || nw.AfterPanic == 0):
		return []string{fmt.Sprintf("worker %d (%s): %d panics in fn, %d leases after the first; want both > 0", w, name, nw.Panics, nw.AfterPanic)}
	case style == styleDoExtend && nw.Extends == 0:
		return []string{fmt.Sprintf("worker %d (%s) never called Extend from fn", w, name)}
	}
	return nil
}

// nemesisWorkers is what each client did: its leases from the history,
// the rest from its statistics (none for a worker that left none).
func nemesisWorkers(h *history, stats []*workerStats, clients []nemesisClient) []NemesisWorker {
	granted := map[int]int{}
	for _, s := range h.sections {
		granted[s.Worker]++
	}
	out := make([]NemesisWorker, len(stats))
	for w, st := range stats {
		c := clients[w%len(clients)]
		nw := NemesisWorker{Worker: w, Client: c.name, Refused: c.refused, Aliased: c.aliased, Polling: c.polls, Granted: granted[w]}
		if st != nil {
			nw.Accepted, nw.Refusals, nw.RefusalError = st.Accepted, st.Refused, st.RefusedError
			nw.OtherFailures = st.Failures - st.Refused
			nw.Panics, nw.AfterPanic, nw.Extends, nw.ExtendErrors = st.Panics, st.AfterPanic, st.Extends, st.ExtendErrors
			nw.LastError = st.LastError
		}
		out[w] = nw
	}
	return out
}
