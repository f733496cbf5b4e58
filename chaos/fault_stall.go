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
		topologies: []string{Single, PgAdvisory, PgRow, Etcd3, ZK3},
		pollable:   true,
		runs: map[string][]Scenario{
			"quick": {
				stallRun(Single, "none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(Single, "write-only", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(Single, "claim-first", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(PgAdvisory, "none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(Etcd3, "none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(PgRow, "none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
				stallRun(ZK3, "none", 4, 60, 0.05, quickWork, 300*time.Millisecond, 300*time.Millisecond, 0),
			},
			"full": stallSweep(),
		},
	})
}

// stallSweep is the full profile: the published experiment (8 workers,
// 10,000 sections, stalls of 1.5 TTL at three rates, 5 runs each) in every
// fencing mode, and an overlap variant; then the same stalls (300 ms,
// in time rather than in TTLs) on the advisory lock and on etcd, once per
// rate, where what they cost is waiting rather than lost updates.
func stallSweep() []Scenario {
	var runs []Scenario
	for _, rate := range []float64{0.001, 0.01, 0.05} {
		for _, mode := range fencingModes {
			for rep := range 5 {
				runs = append(runs, stallRun(Single, mode, 8, 1250, rate, quickWork, 300*time.Millisecond, 300*time.Millisecond, rep+1))
			}
		}
	}
	for _, topo := range []string{PgAdvisory, Etcd3} {
		for _, rate := range []float64{0.001, 0.01, 0.05} {
			runs = append(runs, stallRun(topo, "none", 8, 1250, rate, quickWork, 300*time.Millisecond, 300*time.Millisecond, 1))
		}
	}
	// The overlap variant: work is half the TTL and stalls are shorter
	// than the TTL to a little over it, so a stale holder often writes
	// while the next one is between its read and its write.
	for _, mode := range fencingModes {
		for rep := range 5 {
			runs = append(runs, stallRun(Single, mode, 8, 125, 0.2, 100*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond, rep+1))
		}
	}
	return runs
}

// stallRun is a run on topo whose sections stall at rate for lo to hi.
// On Redis only the modes that fence the read can promise no lost
// update. A stall is a sleep in a running process: etcd's session keeps
// renewing its lease through it and the advisory lock has none, so
// neither may lose an update to one.
func stallRun(topo, mode string, workers, sections int, rate float64, work, lo, hi time.Duration, rep int) Scenario {
	e := Expect{}
	if mode == "claim-first" || mode == "fence-table" || topo != Single {
		e.Lost = Zero
	}
	if topo != Single {
		e.Overlaps = Zero
	}
	return Scenario{Topology: topo, Fencing: mode, Workers: workers, Sections: sections,
		TTL: topologyTTL(topo), Work: work, StallRate: rate, StallMin: lo, StallMax: hi, Repeat: rep, Expect: e}
}
