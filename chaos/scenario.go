package chaos

import (
	"fmt"
	"strings"
	"time"
)

// fencingModes lists the fencing modes in report order.
var fencingModes = []string{"none", "write-only", "claim-first", "fence-table"}

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
	// Style, when set, is every worker's style (workerConfig.Style), unless
	// the fault sets its workers' own: "election" makes each a candidate
	// in one leader election (Profile.Electing).
	Style string
	// Duration > 0 makes a timed run: the workers go on until it is up,
	// and Sections is no limit.
	Duration time.Duration
	Expect   Expect
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
	if s.Style != "" {
		n += "/" + s.Style
	}
	if s.Repeat > 0 {
		n += fmt.Sprintf("#%d", s.Repeat)
	}
	return n
}

// Quarantine reports whether the scenario's clients keep restarted nodes
// out: where the topology has peers that can remember a node, unless the
// fault's runs show what happens without it (see docs/chaos.md).
func (s Scenario) Quarantine() bool {
	t := lookupTopology(s.Topology)
	if t == nil || !t.quarantine {
		return false
	}
	f := lookupFault(s.Fault)
	return f == nil || !f.noQuarantine
}

// Expect is what a run must show; the suite fails when it does not.
type Expect struct {
	Overlaps  Bound         // mutual-exclusion violations (valid leases that coexisted)
	Lost      Bound         // lost updates
	Granted   bool          // sections were granted while the fault was active
	Ungranted bool          // no section was granted while the fault was active
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
	if e.Ungranted {
		p = append(p, "no grant during the fault")
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
