package chaos

import "time"

// stallFault is the fault of the published experiment, which the report's
// stall summary and comparison pick out.
const stallFault = "stall"

func init() {
	register(&fault{
		name:       stallFault,
		rank:       190,
		doc:        "sections stall inside the worker (sleep) at a given rate",
		topologies: []string{Single},
		pollable:   true,
		runs: map[string][]Scenario{
			"quick": {
				stallRun("none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun("write-only", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun("claim-first", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
			},
			"full": stallSweep(),
		},
	})
}

// stallSweep is the full profile: the published experiment (8 workers,
// 10,000 sections, stalls of 1.5 TTL at three rates, 5 runs each) in every
// fencing mode, and an overlap variant.
func stallSweep() []Scenario {
	var runs []Scenario
	for _, rate := range []float64{0.001, 0.01, 0.05} {
		for _, mode := range FencingModes {
			for rep := range 5 {
				runs = append(runs, stallRun(mode, 8, 1250, rate, quickWork, 300*time.Millisecond, 300*time.Millisecond, rep+1))
			}
		}
	}
	// The overlap variant: work is half the TTL and stalls are shorter
	// than the TTL to a little over it, so a stale holder often writes
	// while the next one is between its read and its write.
	for _, mode := range FencingModes {
		for rep := range 5 {
			runs = append(runs, stallRun(mode, 8, 125, 0.2, 100*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond, rep+1))
		}
	}
	return runs
}

// stallRun is a single-node run whose sections stall at rate for lo to hi.
// Only the modes that fence the read can promise no lost update.
func stallRun(mode string, workers, sections int, rate float64, work, lo, hi time.Duration, rep int) Scenario {
	e := Expect{}
	if mode == "claim-first" || mode == "fence-table" {
		e.Lost = Zero
	}
	return Scenario{Topology: Single, Fencing: mode, Workers: workers, Sections: sections,
		TTL: quickTTL, Work: work, StallRate: rate, StallMin: lo, StallMax: hi, Repeat: rep, Expect: e}
}
