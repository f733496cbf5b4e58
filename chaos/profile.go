package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Profile is a named list of runs.
type Profile struct {
	Name string
	Runs []Scenario
}

// Profiles lists the profile names. A profile's runs are those its name
// gets in each registered fault, in the faults' rank order. The soak
// profile is the randomized nemesis, one minute of it unless Lasting
// sets another length.
var Profiles = []string{"smoke", "quick", "full", "soak"}

// soakSegment is the longest timed run Lasting makes: a longer soak is
// several runs one after another, each on fresh servers and with a seed
// of its own, so that one run's history stays small enough to check.
const soakSegment = 10 * time.Minute

// LookupProfile returns a profile by name.
func LookupProfile(name string) (Profile, error) {
	if !slices.Contains(Profiles, name) {
		return Profile{}, fmt.Errorf("chaos: unknown profile %q (want one of %s)", name, strings.Join(Profiles, ", "))
	}
	p := Profile{Name: name}
	for _, f := range faults.ordered {
		p.Runs = append(p.Runs, f.runs[name]...)
	}
	return p, nil
}

// What the free-running runs use unless a fault says otherwise.
const (
	quickTTL  = 200 * time.Millisecond
	quickWork = 5 * time.Millisecond
)

// The expectations many faults share.
var (
	// expectSafe: no two valid leases, and locks were still granted while
	// the fault was on.
	expectSafe = Expect{Overlaps: Zero, Granted: true}
	// expectUnsafe: the fault let two valid leases coexist.
	expectUnsafe = Expect{Overlaps: Positive}
)

// newRun is a free-running run of the fault that declares it (register
// fills in the fault): workers take the lock in a loop while the fault
// strikes, with leases of the topology's TTL.
func newRun(topo, mode string, workers, sections int, e Expect) Scenario {
	return Scenario{Topology: topo, Fencing: mode, Workers: workers, Sections: sections,
		TTL: topologyTTL(topo), Work: quickWork, Expect: e}
}

// topologyTTL is the TTL of topo's runs (0 for an unknown name, which the
// registry then reports).
func topologyTTL(topo string) time.Duration {
	if t := lookupTopology(topo); t != nil {
		return t.ttl
	}
	return 0
}

// Filter keeps the runs whose topology, fault and fencing mode are in the
// given lists (an empty list keeps all). Unknown names are an error.
func (p Profile) Filter(topologies, faults, modes []string) (Profile, error) {
	for _, t := range topologies {
		if !slices.Contains(allTopologies, t) {
			return p, fmt.Errorf("chaos: unknown topology %q (want one of %s)", t, strings.Join(allTopologies, ", "))
		}
	}
	for _, f := range faults {
		if lookupFault(f) == nil {
			return p, fmt.Errorf("chaos: unknown fault %q (want one of %s)", f, strings.Join(FaultNames(), ", "))
		}
	}
	for _, m := range modes {
		if !slices.Contains(fencingModes, m) {
			return p, fmt.Errorf("chaos: unknown fencing mode %q (want one of %s)", m, strings.Join(fencingModes, ", "))
		}
	}
	out := Profile{Name: p.Name}
	for _, s := range p.Runs {
		if (len(topologies) == 0 || slices.Contains(topologies, s.Topology)) &&
			(len(faults) == 0 || slices.Contains(faults, s.Fault)) &&
			(len(modes) == 0 || slices.Contains(modes, s.Fencing)) {
			out.Runs = append(out.Runs, s)
		}
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: profile %s has no run matching the filters", p.Name)
	}
	return out, nil
}

// Polling keeps the runs whose fault allows it (the stall runs) and makes
// their waiters poll: TryLock, and after a refusal sleep every and try
// again, as simple clients do (redis-py's Lock sleeps 100 ms by default),
// instead of Lock's wait for the release notice or the holder's expiry.
// every == 0 leaves p as it is.
func (p Profile) Polling(every time.Duration) (Profile, error) {
	if every == 0 {
		return p, nil
	}
	if every < time.Millisecond || every > time.Second {
		return p, fmt.Errorf("chaos: poll interval %v out of range (1ms to 1s)", every)
	}
	if every%time.Millisecond != 0 {
		// Workers take it in whole milliseconds; say so rather than round.
		return p, fmt.Errorf("chaos: poll interval %v is not a whole number of milliseconds", every)
	}
	out := Profile{Name: p.Name}
	for _, s := range p.Runs {
		if f := lookupFault(s.Fault); f != nil && f.pollable {
			s.Poll = every
			out.Runs = append(out.Runs, s)
		}
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: polling applies to the stall runs, and the selected runs of profile %s have none", p.Name)
	}
	return out, nil
}

// Electing keeps the runs whose workers take a redlock lease, whose
// fault leaves the workers' style alone and whose lock is not broken on
// purpose (no run that expects overlaps), and makes every worker a
// candidate in one leader election (redlock/election): each section is a
// leadership, a lease kept renewed whose fencing token is the term, so
// the runs' checks become the election's. on == false leaves p as it is.
func (p Profile) Electing(on bool) (Profile, error) {
	if !on {
		return p, nil
	}
	out := Profile{Name: p.Name}
	for _, s := range p.Runs {
		t, f := lookupTopology(s.Topology), lookupFault(s.Fault)
		if t == nil || f == nil || t.lock != lockRedlock || s.Expect.Overlaps == Positive || s.Poll > 0 || !leavesStyle(f, s) {
			continue
		}
		s.Style = styleElection
		out.Runs = append(out.Runs, s)
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: the election applies to runs on redlock topologies whose fault leaves the workers' style alone, and the selected runs of profile %s have none", p.Name)
	}
	return out, nil
}

// Transferring keeps the runs on redlock topologies whose fault leaves
// the workers' style alone, whose lock is not broken on purpose (no run
// that expects overlaps) and that expect grants, and makes every worker
// move money between accounts (styleTransfers): each section locks two
// accounts' keys at once and makes one transfer. Transfers are fenced:
// a run the profile lists without fencing becomes claim-first, unless
// its fault's runs in the profile compare fencing modes (then it stays
// the unfenced control, a fenced twin being there). Every fenced run
// except write-only's must lose nothing. on == false leaves p as it is.
func (p Profile) Transferring(on bool) (Profile, error) {
	if !on {
		return p, nil
	}
	out := Profile{Name: p.Name}
	for _, s := range p.Runs {
		t, f := lookupTopology(s.Topology), lookupFault(s.Fault)
		if t == nil || f == nil || t.lock != lockRedlock || s.Expect.Overlaps == Positive || s.Expect.NoQuorum ||
			s.Poll > 0 || s.Style != "" || !leavesStyle(f, s) {
			continue
		}
		s.Style = styleTransfers
		if s.Fencing == "none" && !comparesFencing(f, p.Name, s.Topology) {
			s.Fencing = "claim-first"
		}
		if s.Fencing == "claim-first" || s.Fencing == "fence-table" {
			s.Expect.Lost = Zero
		}
		out.Runs = append(out.Runs, s)
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: the transfers apply to runs on redlock topologies whose fault leaves the workers' style alone and grants locks, and the selected runs of profile %s have none", p.Name)
	}
	return out, nil
}

// comparesFencing reports whether f's runs in profile list topo with a
// fencing mode other than none.
func comparesFencing(f *fault, profile, topo string) bool {
	for _, s := range f.runs[profile] {
		if s.Topology == topo && s.Fencing != "none" {
			return true
		}
	}
	return false
}

// leavesStyle reports whether f's worker hook, if any, leaves every worker
// of s taking its lock with Lock: it sets no style and no Do hold cap.
func leavesStyle(f *fault, s Scenario) bool {
	if f.worker == nil {
		return true
	}
	for w := range s.Workers {
		cfg := workerConfig{ID: w, Lock: lockRedlock, TTLms: int(s.TTL.Milliseconds()), Nodes: []string{"a", "b", "c", "d", "e"}}
		f.worker(w, &cfg)
		if cfg.Style != "" || cfg.HoldMs > 0 {
			return false
		}
	}
	return true
}

// Lasting makes the timed runs of p (the soak profile's) last d in all:
// each becomes runs of at most soakSegment, numbered as repeats, whose
// durations add up to d. d must be at least 10 s; p must have timed runs.
func (p Profile) Lasting(d time.Duration) (Profile, error) {
	if d < 10*time.Second {
		return p, fmt.Errorf("chaos: duration %v is too short (at least 10s)", d)
	}
	out := Profile{Name: p.Name}
	timed := false
	for _, s := range p.Runs {
		if s.Duration <= 0 {
			out.Runs = append(out.Runs, s)
			continue
		}
		timed = true
		if d <= soakSegment {
			s.Duration = d
			out.Runs = append(out.Runs, s)
			continue
		}
		for i, left := 1, d; left > 0; i++ {
			s.Repeat, s.Duration = i, min(left, soakSegment)
			left -= s.Duration
			out.Runs = append(out.Runs, s)
		}
	}
	if !timed {
		return out, fmt.Errorf("chaos: profile %s has no timed runs to last %v (the soak profile has)", p.Name, d)
	}
	return out, nil
}

// Named keeps the runs whose name (Scenario.Name, as the table and the
// JSON report print it) contains sub. An empty sub keeps every run.
func (p Profile) Named(sub string) (Profile, error) {
	if sub == "" {
		return p, nil
	}
	out := Profile{Name: p.Name}
	for _, s := range p.Runs {
		if strings.Contains(s.Name(), sub) {
			out.Runs = append(out.Runs, s)
		}
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: profile %s has no run whose name contains %q", p.Name, sub)
	}
	return out, nil
}
