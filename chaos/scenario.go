package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Topologies.
const (
	Single        = "single"         // one primary
	SingleReplica = "single+replica" // a primary and an asynchronous replica that a failover promotes
	Redlock5      = "redlock-5"      // five independent primaries
)

// Topologies lists the topology names in report order.
var Topologies = []string{Single, SingleReplica, Redlock5}

// Faults lists every fault name the suite knows, with what it does.
var Faults = map[string]string{
	"none":                        "no fault",
	"kill-1":                      "kill -9 of one primary, which stays down",
	"kill-2":                      "kill -9 of two primaries, which stay down",
	"kill-3":                      "kill -9 of three primaries: no quorum",
	"pause-primary-2":             "SIGSTOP of two primaries for a while, then SIGCONT",
	"partition-2":                 "every client cut off (blackholed) from two primaries of its own for a while",
	"slow-1":                      "100 ms added to every reply of one primary, for every client",
	"restart-empty":               "the holder won exactly 3 nodes; one restarts empty while it holds (restart quarantine on)",
	"restart-empty-no-quarantine": "as restart-empty, with the client's restart quarantine off",
	"restart-delayed":             "as restart-empty, but the node stays down past the TTL before it restarts empty (quarantine off)",
	"restart-aof":                 "as restart-empty, but the node runs appendfsync always (quarantine off)",
	"failover":                    "replication held back, primary killed, replica promoted while the lock is held",
	"worker-freeze":               "SIGSTOP of the holder between read and write, past its lease",
	"freeze-acquire":              "SIGSTOP of a worker while its acquire round is in flight",
	"worker-crash":                "kill -9 of the holder: the lock is never released",
	"renewal-hang":                "the holder's section hangs while Do keeps extending its lease, until the hold cap (WithMaxHold) stops it",
	"clock-jump":                  "the holder won exactly 3 nodes; one node's wall clock jumps past the TTL",
	"stall":                       "sections stall inside the worker (sleep) at a given rate",
	"mixed":                       "a seeded schedule of node kills and empty restarts, pauses, partitions, slow links and worker freezes",
}

// FencingModes lists the fencing modes in report order.
var FencingModes = []string{"none", "write-only", "claim-first", "fence-table"}

// Scenario is one run: a topology under one fault, with one fencing mode.
type Scenario struct {
	Topology  string
	Fault     string
	Fencing   string
	Workers   int
	Sections  int // accepted increments each worker aims for
	TTL       time.Duration
	Work      time.Duration
	StallRate float64
	StallMin  time.Duration
	StallMax  time.Duration
	Repeat    int           // which of several identical runs (full profile)
	Poll      time.Duration // > 0: waiters poll TryLock this often instead of waiting in Lock
	Expect    Expect
}

// Name identifies the scenario in seeds and messages.
func (s Scenario) Name() string {
	n := s.Topology + "/" + s.Fault + "/" + s.Fencing
	if s.StallRate > 0 {
		n += fmt.Sprintf("/stall=%g%%/work=%v", s.StallRate*100, s.Work)
	}
	if s.Poll > 0 {
		n += fmt.Sprintf("/poll=%v", s.Poll)
	}
	if s.Repeat > 0 {
		n += fmt.Sprintf("#%d", s.Repeat)
	}
	return n
}

// Quarantine reports whether the scenario's clients keep restarted nodes
// out. It is off for the runs that show what happens without it, and for
// single-node topologies, where no peer can remember the node (see
// docs/chaos.md).
func (s Scenario) Quarantine() bool {
	switch s.Fault {
	case "restart-empty-no-quarantine", "restart-delayed", "restart-aof":
		return false
	}
	return s.Topology == Redlock5
}

// Expect is what a run must show; the suite fails when it does not.
type Expect struct {
	Overlaps  Bound         // mutual-exclusion violations (valid leases that coexisted)
	Lost      Bound         // lost updates
	Granted   bool          // sections were granted while the fault was active
	NoQuorum  bool          // nothing was granted and the error names the missing quorum
	MinBlock  time.Duration // others waited at least this long for the holder
	MaxBlock  time.Duration // and at most this long
	Rejection bool          // the stale writer was refused at least once
}

// Bound is a constraint on a count: Any, Zero or Positive.
type Bound int

// Bounds.
const (
	Any Bound = iota
	Zero
	Positive
)

func (b Bound) check(what string, v int) error {
	switch {
	case b == Zero && v != 0:
		return fmt.Errorf("%s = %d, want 0", what, v)
	case b == Positive && v <= 0:
		return fmt.Errorf("%s = %d, want > 0", what, v)
	}
	return nil
}

func (b Bound) String() string {
	switch b {
	case Zero:
		return "=0"
	case Positive:
		return ">0"
	}
	return "any"
}

// Describe renders the expectation for reports.
func (e Expect) Describe() string {
	var p []string
	if e.Overlaps != Any {
		p = append(p, "overlaps"+e.Overlaps.String())
	}
	if e.Lost != Any {
		p = append(p, "lost"+e.Lost.String())
	}
	if e.Granted {
		p = append(p, "granted")
	}
	if e.NoQuorum {
		p = append(p, "no grants, clear error")
	}
	if e.MinBlock > 0 {
		p = append(p, fmt.Sprintf("blocked>=%v", e.MinBlock))
	}
	if e.MaxBlock > 0 {
		p = append(p, fmt.Sprintf("blocked<=%v", e.MaxBlock))
	}
	if e.Rejection {
		p = append(p, "rejected>0")
	}
	return strings.Join(p, ", ")
}

// Profile is a named list of runs.
type Profile struct {
	Name string
	Runs []Scenario
}

// Profiles lists the profile names.
var Profiles = []string{"smoke", "quick", "full"}

// engineered faults script one holder and one challenger (see runner).
func engineered(fault string) bool {
	switch fault {
	case "restart-empty", "restart-empty-no-quarantine", "restart-delayed", "restart-aof", "failover", "clock-jump":
		return true
	}
	return false
}

// free-running defaults.
const (
	quickTTL = 200 * time.Millisecond
	engTTL   = 1200 * time.Millisecond // long enough to script a fault inside one lease
)

func run(topo, fault, mode string, workers, sections int, e Expect) Scenario {
	s := Scenario{Topology: topo, Fault: fault, Fencing: mode, Workers: workers, Sections: sections,
		TTL: quickTTL, Work: 5 * time.Millisecond, Expect: e}
	if engineered(fault) {
		s.TTL, s.Workers = engTTL, 2
	}
	return s
}

// LookupProfile returns a profile by name.
func LookupProfile(name string) (Profile, error) {
	safe := Expect{Overlaps: Zero, Granted: true}
	unsafe := Expect{Overlaps: Positive}
	switch name {
	case "smoke":
		return Profile{Name: name, Runs: []Scenario{
			run(Redlock5, "kill-2", "none", 3, 15, safe),
			run(Redlock5, "partition-2", "none", 3, 15, safe),
			run(Redlock5, "kill-3", "none", 2, 3, Expect{NoQuorum: true}),
			run(Redlock5, "restart-empty", "none", 2, 4, Expect{Overlaps: Zero}),
			run(Redlock5, "restart-empty-no-quarantine", "none", 2, 4, unsafe),
			run(SingleReplica, "failover", "none", 2, 4, unsafe),
			run(Redlock5, "worker-freeze", "none", 3, 8, Expect{Lost: Positive}),
			run(Redlock5, "worker-freeze", "claim-first", 3, 8, Expect{Lost: Zero, Rejection: true}),
			run(Redlock5, "worker-freeze", "fence-table", 3, 8, Expect{Lost: Zero}),
			run(Redlock5, "clock-jump", "none", 2, 4, unsafe),
			run(Redlock5, "clock-jump", "claim-first", 2, 4, Expect{Lost: Zero, Rejection: true}),
			run(Redlock5, "renewal-hang", "none", 3, 6, hang(Expect{})),
		}}, nil
	case "quick":
		return Profile{Name: name, Runs: []Scenario{
			run(Redlock5, "none", "none", 4, 40, Expect{Overlaps: Zero}),
			run(Single, "none", "none", 4, 40, Expect{Overlaps: Zero}),
			run(Redlock5, "kill-1", "none", 4, 40, safe),
			run(Redlock5, "kill-2", "none", 4, 40, safe),
			run(Redlock5, "pause-primary-2", "none", 4, 40, safe),
			run(Redlock5, "partition-2", "none", 4, 40, safe),
			run(Redlock5, "slow-1", "none", 4, 40, safe),
			run(Redlock5, "kill-3", "none", 2, 3, Expect{NoQuorum: true}),
			run(Redlock5, "restart-empty", "none", 2, 10, Expect{Overlaps: Zero}),
			run(Redlock5, "restart-empty-no-quarantine", "none", 2, 10, unsafe),
			run(Redlock5, "restart-empty-no-quarantine", "claim-first", 2, 10, Expect{Overlaps: Positive, Lost: Zero}),
			run(Redlock5, "restart-delayed", "none", 2, 10, Expect{Overlaps: Zero}),
			run(Redlock5, "restart-aof", "none", 2, 10, Expect{Overlaps: Zero}),
			run(SingleReplica, "failover", "none", 2, 10, unsafe),
			run(SingleReplica, "failover", "claim-first", 2, 10, Expect{Overlaps: Positive, Lost: Zero}),
			run(Redlock5, "worker-freeze", "none", 4, 20, Expect{Overlaps: Zero, Lost: Positive}),
			run(Redlock5, "worker-freeze", "write-only", 4, 20, Expect{Overlaps: Zero}),
			run(Redlock5, "worker-freeze", "claim-first", 4, 20, Expect{Overlaps: Zero, Lost: Zero, Rejection: true}),
			run(Redlock5, "worker-freeze", "fence-table", 4, 20, Expect{Overlaps: Zero, Lost: Zero}),
			run(Redlock5, "freeze-acquire", "none", 4, 20, Expect{Overlaps: Zero}),
			run(Redlock5, "worker-crash", "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: quickTTL + 300*time.Millisecond}),
			run(Redlock5, "renewal-hang", "none", 3, 10, hang(Expect{Lost: Positive})),
			run(Redlock5, "renewal-hang", "claim-first", 3, 10, hang(Expect{Lost: Zero, Rejection: true})),
			run(Redlock5, "clock-jump", "none", 2, 10, unsafe),
			run(Redlock5, "clock-jump", "claim-first", 2, 10, Expect{Lost: Zero, Rejection: true}),
			run(Redlock5, "mixed", "claim-first", 4, 60, Expect{Overlaps: Zero, Lost: Zero}),
			stallRun(Single, "none", 4, 60, 0.05, 5*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 0),
			stallRun(Single, "write-only", 4, 60, 0.05, 5*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 0),
			stallRun(Single, "claim-first", 4, 60, 0.05, 5*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 0),
		}}, nil
	case "full":
		var runs []Scenario
		for _, rate := range []float64{0.001, 0.01, 0.05} {
			for _, mode := range FencingModes {
				for rep := range 5 {
					runs = append(runs, stallRun(Single, mode, 8, 1250, rate, 5*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, rep+1))
				}
			}
		}
		// The overlap variant: work is half the TTL and stalls are shorter
		// than the TTL to a little over it, so a stale holder often writes
		// while the next one is between its read and its write.
		for _, mode := range FencingModes {
			for rep := range 5 {
				runs = append(runs, stallRun(Single, mode, 8, 125, 0.2, 100*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond, rep+1))
			}
		}
		return Profile{Name: name, Runs: runs}, nil
	}
	return Profile{}, fmt.Errorf("chaos: unknown profile %q (want one of %s)", name, strings.Join(Profiles, ", "))
}

// holdCap is the WithMaxHold of the renewal-hang runs: three TTLs, so
// that waiting for it is clearly renewal at work and not one TTL.
const holdCap = 3 * quickTTL

// hang adds what every renewal-hang run must show to e: no two valid
// leases, and the others blocked past one TTL (renewal kept the hung
// holder's lease) but not much past the hold cap plus one TTL.
func hang(e Expect) Expect {
	e.Overlaps, e.MinBlock, e.MaxBlock = Zero, holdCap, holdCap+quickTTL+300*time.Millisecond
	return e
}

func stallRun(topo, mode string, workers, sections int, rate float64, work, lo, hi time.Duration, rep int) Scenario {
	e := Expect{}
	if mode == "claim-first" || mode == "fence-table" {
		e.Lost = Zero
	}
	return Scenario{Topology: topo, Fault: "stall", Fencing: mode, Workers: workers, Sections: sections,
		TTL: quickTTL, Work: work, StallRate: rate, StallMin: lo, StallMax: hi, Repeat: rep, Expect: e}
}

// Filter keeps the runs whose topology, fault and fencing mode are in the
// given lists (an empty list keeps all). Unknown names are an error.
func (p Profile) Filter(topologies, faults, modes []string) (Profile, error) {
	for _, t := range topologies {
		if !slices.Contains(Topologies, t) {
			return p, fmt.Errorf("chaos: unknown topology %q (want one of %s)", t, strings.Join(Topologies, ", "))
		}
	}
	for _, f := range faults {
		if _, ok := Faults[f]; !ok {
			names := make([]string, 0, len(Faults))
			for n := range Faults {
				names = append(names, n)
			}
			slices.Sort(names)
			return p, fmt.Errorf("chaos: unknown fault %q (want one of %s)", f, strings.Join(names, ", "))
		}
	}
	for _, m := range modes {
		if !slices.Contains(FencingModes, m) {
			return p, fmt.Errorf("chaos: unknown fencing mode %q (want one of %s)", m, strings.Join(FencingModes, ", "))
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

// Polling keeps the stall runs and makes their waiters poll: TryLock, and
// after a refusal sleep every and try again, as simple clients do
// (redis-py's Lock sleeps 100 ms by default), instead of Lock's wait for
// the release notice or the holder's expiry. every == 0 leaves p as it is.
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
		if s.Fault == "stall" {
			s.Poll = every
			out.Runs = append(out.Runs, s)
		}
	}
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("chaos: polling applies to the stall runs, and the selected runs of profile %s have none", p.Name)
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
