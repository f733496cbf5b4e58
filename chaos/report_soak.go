package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// soakTotals adds up a report's nemesis runs: what the soak table shows.
type soakTotals struct {
	Runs            int
	Seeds           []uint64
	Duration        time.Duration // the runs' wall time, setup included
	Granted         int           // leases granted (sections)
	Accepted        int           // claim-first increments committed (row 1)
	Rejected        int           // stale claim-first writes refused
	UnfencedOK      int64         // increments of the unfenced row
	UnfencedLost    int64         // its lost updates (no fencing there: not a failure)
	Overlaps        int
	ValidOverlaps   int
	GrantInversions int
	TokenInversions int
	Lost            int64 // claim-first lost updates
	StaleOverlaps   int
	LateSections    int
	Refusals        map[string]int // ConfigError refusals, by client
	OtherFailures   map[string]int // other lock failures, by client
	Granted2        map[string]int // leases, by client
	Panics          int
	AfterPanic      int
	Extends         int
	ExtendErrors    int
	Faults          map[string]int
	Linearizable    map[string]int
	Failed          int
}

// sumSoak returns the totals of rep's nemesis runs, or nil when it has none.
func sumSoak(rep *Report) *soakTotals {
	var t *soakTotals
	for _, r := range rep.Runs {
		if r.Nemesis == nil && !strings.HasPrefix(r.Fault, "nemesis") {
			continue
		}
		if t == nil {
			t = &soakTotals{Refusals: map[string]int{}, OtherFailures: map[string]int{}, Granted2: map[string]int{},
				Faults: map[string]int{}, Linearizable: map[string]int{}}
		}
		t.Runs++
		t.Seeds = append(t.Seeds, r.Seed)
		t.Duration += time.Duration(r.DurationMs) * time.Millisecond
		t.Granted += r.Sections
		t.Accepted += r.Accepted
		t.Rejected += r.Rejected
		if r.Unfenced != nil {
			t.UnfencedOK += r.Unfenced.Accepted
			t.UnfencedLost += r.Unfenced.LostUpdates
		}
		t.Overlaps += r.Overlaps
		t.ValidOverlaps += r.ValidOverlaps
		t.GrantInversions += r.GrantInversions
		t.TokenInversions += r.TokenInversions
		t.Lost += r.LostUpdates
		t.StaleOverlaps += r.StaleOverlaps
		t.LateSections += r.LateSections
		t.Linearizable[r.Linearizable]++
		for _, w := range r.Nemesis {
			t.Granted2[w.Client] += w.Granted
			t.Refusals[w.Client] += w.Refusals
			t.OtherFailures[w.Client] += w.OtherFailures
			t.Panics += w.Panics
			t.AfterPanic += w.AfterPanic
			t.Extends += w.Extends
			t.ExtendErrors += w.ExtendErrors
		}
		for k, v := range r.FaultCounts {
			t.Faults[k] += v
		}
		if !r.Pass {
			t.Failed++
		}
	}
	return t
}

// WriteSoak writes the soak table: the nemesis runs' totals, the clients
// one by one, and the faults injected. It writes nothing for a report
// without nemesis runs.
func WriteSoak(w io.Writer, rep *Report) {
	t := sumSoak(rep)
	if t == nil {
		return
	}
	seeds := make([]string, len(t.Seeds))
	for i, s := range t.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(w, "\nNemesis: %d runs, %v in all, suite seed %d (run seeds %s)\n\n", t.Runs, t.Duration.Round(time.Second), rep.Seed, strings.Join(seeds, ", "))
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	row := func(k string, v any) { fmt.Fprintf(w, "| %s | %v |\n", k, v) }
	row("leases granted", t.Granted)
	row("claim-first increments committed", t.Accepted)
	row("stale claim-first writes refused", t.Rejected)
	row("**overlaps of valid lease windows**", t.ValidOverlaps)
	row("overlaps up to the section's end", t.Overlaps)
	row("**grant token inversions**", t.GrantInversions)
	row("**token inversions at the resource**", t.TokenInversions)
	row("**lost updates, claim-first**", t.Lost)
	row("sections that ended after their deadline", t.LateSections)
	row("sections that overlapped at the resource, valid or not", t.StaleOverlaps)
	row("unfenced row: increments / lost", fmt.Sprintf("%d / %d", t.UnfencedOK, t.UnfencedLost))
	row("panics in fn recovered / leases granted after one", fmt.Sprintf("%d / %d", t.Panics, t.AfterPanic))
	row("Extend calls from fn / failed", fmt.Sprintf("%d / %d", t.Extends, t.ExtendErrors))
	row("linearizability (porcupine), runs", fmtCounts(t.Linearizable))
	row("runs that failed a check", t.Failed)
	fmt.Fprintf(w, "\n| client | expected | leases | refused (ErrConfigMismatch) | other lock failures |\n|---|---|---|---|---|\n")
	for _, c := range slices.Concat(nemesisClients, reconfigClients) {
		if _, ran := t.Granted2[c.name]; !ran {
			continue // a client of the other nemesis, which did not run
		}
		exp := "granted"
		switch {
		case c.refused:
			exp = "refused"
		case c.aliased:
			exp = "refused once its second name answers"
		case slices.ContainsFunc(reconfigClients, func(r nemesisClient) bool { return r.name == c.name }):
			exp = "granted with its settings, refused with the others"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d |\n", c.name, exp, t.Granted2[c.name], t.Refusals[c.name], t.OtherFailures[c.name])
	}
	fmt.Fprintf(w, "\nFaults injected: %s\n", fmtCounts(t.Faults))
}

func fmtCounts(m map[string]int) string {
	var p []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p = append(p, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(p, ", ")
}
