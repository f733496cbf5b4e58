package model

import (
	"slices"
	"strings"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The reconfiguration's scenarios (Theorem 5 of docs/protocol.md, with
// Theorem 4's confirm): the ways a review found Reconfigure to go wrong on
// real redis-server, R1-R4, each a clean scenario of the current protocol,
// and each with a guard taken out in KnownDefects, where the explorer finds
// the defect that guard prevents.
//
// They run the admission as the library does (Config.Confirm), its
// replies at once and no attempt given up, without symmetry reduction (the
// lists name nodes), and with one-node lists where the defect needs no
// more: a majority of one is one, and every step saved is a level of the
// search. The old settings S have a max ttl of 3 ticks (a lease of 3 ticks
// is trusted until 2.97); the new settings T a max ttl of one tick, so
// that Q(T) is 2 ticks and Q(S) 4: a lease of T two ticks after a lease of
// S is a double grant, one four ticks after is not.
func reconfigScenarios() []Scenario {
	s := lease(3, 0.01, 1) // the old settings S, and a lease of them
	t := lease(1, 0.01, 2) // the new settings T: two TryLock calls
	t.AfterReconfigure = true
	on := func(cc ClientConfig, nodes ...int) ClientConfig { cc.Servers = nodes; return cc }
	base := Config{Admitted: true, Confirm: true, RepliesAtOnce: true, NoGiveUps: true, Pendings: 2, MaxTime: 2}

	// R1: old {0}, new {1}, disjoint. The command may stop after any step
	// (or its calls to node 1 be slow): a client of T started once step 1
	// is done must not find node 1 bare and admit it by the first-admission
	// path, no peer in its list carrying a mark.
	r1 := base
	r1.Nodes = 2
	r1.Clients = []ClientConfig{on(s, 0), on(t, 1)}
	r1.Reconfigs = []Reconfig{{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1}}
	r1.ReconfigRuns = 1
	r1.Depth = 18

	// R1 with a client of T that calls Bootstrap at every start: its
	// Bootstrap must not find node 1 bare and admit it at once.
	r1boot := r1
	r1boot.Pendings = 0
	r1boot.Bootstraps = 1
	r1boot.BootClient = 1
	r1boot.Depth = 12

	// R2: old {0}, new {0, 1, 2}. A run with the right old settings stops
	// once step 1 landed: node 0 carries "reconfiguring to T" (it holds a
	// lease of S), nodes 1 and 2 too. A rerun typed with a wrong
	// --from-drift (0.02, whose Q is 2 ticks) must be refused, not size
	// its hold-off from the wrong settings; the right rerun finishes. (With
	// one node in both lists the lease's own key stands in the way.)
	r2 := base
	r2.Nodes = 3
	r2.Clients = []ClientConfig{on(s, 0), on(t, 0, 1, 2)}
	r2.Clients[0].Holds = true
	wrong := lease(1, 0.02, 0) // the old settings as mistyped: --from-drift 0.02
	r2.Reconfigs = []Reconfig{
		{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1},
		{From: []int{0}, MaxTTL: wrong.MaxTTL, Factor: wrong.Factor, To: 1},
		{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1},
	}
	r2.ReconfigRuns = 3
	r2.ReconfigInOrder = true
	// The lease of S, run 1 stopped between its steps (its step-1 calls
	// land after it stopped), run 2 with the wrong old settings, which
	// looks at every node and is refused, and run 3, the right rerun,
	// through its step 1: the search goes on from there with its step 2,
	// the clients and time. (A search that also picks the runs and their
	// steps took 1.2 million states: not in the CI's time.)
	r2.Prefix = []string{
		"client 0 starts TryLock", "node 0 runs acquire of client 0",
		`the operator runs Reconfigure (run 1) from [0] "` + s.settings(1) + `"`,
		"node 0 runs look of Reconfigure (run 1)", "node 0 runs look of Reconfigure (run 1)",
		"node 1 runs look of Reconfigure (run 1)", "node 2 runs look of Reconfigure (run 1)",
		"Reconfigure run 1 stops",
		"node 0 runs reconfigure refuse", "node 1 runs reconfigure refuse", "node 2 runs reconfigure refuse",
		`the operator runs Reconfigure (run 2) from [0] "` + wrong.settings(1) + `"`,
		"node 0 runs look of Reconfigure (run 2)", "node 0 runs look of Reconfigure (run 2)",
		"node 1 runs look of Reconfigure (run 2)", "node 2 runs look of Reconfigure (run 2)",
	}
	rerun := []string{
		`the operator runs Reconfigure (run 3) from [0] "` + s.settings(1) + `"`,
		"node 0 runs look of Reconfigure (run 3)", "node 0 runs look of Reconfigure (run 3)",
		"node 1 runs look of Reconfigure (run 3)", "node 2 runs look of Reconfigure (run 3)",
		"node 0 runs reconfigure refuse of Reconfigure (run 3)",
		"node 1 runs reconfigure refuse of Reconfigure (run 3)", "node 2 runs reconfigure refuse of Reconfigure (run 3)",
	}
	r2.Prefix = append(slices.Clip(r2.Prefix), rerun...)
	// One try and one check at a time for the client of T: with two of
	// each, and run 3 from its start, the search took 1.2 million states.
	r2.Clients[1].Attempts = 1
	r2.Pendings = 1
	r2.Depth = 36

	// R3: S -> T finished from {0} to {1} (node 0 retired, node 1
	// admitted with T and the change's record), and a client of T over
	// {1} runs. A stale run of S -> T is called on a client of T over {2},
	// with old list {0} (the retired node) or {1} (the node that carries
	// T): it must be refused, or node 2 would be held off and admitted
	// with T, and two node lists would run under T.
	s1 := lease(1, 0.02, 1) // S, its quarantine 2 ticks: the stale run's hold-off
	r3 := base
	r3.Nodes = 3
	r3.Admitted = false
	r3.Clients = []ClientConfig{on(lease(1, 0.01, 1), 1), on(t, 2)}
	r3.Clients[0].Attempts = 1
	tSettings := t.settings(1)
	sSettings := s1.settings(1)
	done := script.ChangeRecord(sSettings, tSettings, []string{"1"})
	r3.Keys = map[int]map[string]string{
		0: {script.MarkerKey: script.Retired(tSettings), script.TraceKey: done},
		1: {script.MarkerKey: tSettings, script.TraceKey: done},
	}
	r3.Reconfigs = []Reconfig{
		{From: []int{0}, MaxTTL: s1.MaxTTL, Factor: s1.Factor, To: 1},
		{From: []int{1}, MaxTTL: s1.MaxTTL, Factor: s1.Factor, To: 1},
	}
	r3.ReconfigRuns = 1
	r3.Pendings = 1
	r3.Depth = 17

	// R4: one node in both lists. A run stops once step 1 landed, and a
	// rerun typed with the new settings as the old ones (old = new) must
	// not return nil ("nothing to change") and leave the node
	// "reconfiguring to T" with no hold-off: the bounded liveness checks
	// that whenever a run returned nil, a client of T alone locks.
	r4 := base
	r4.Nodes = 1
	r4.Clients = []ClientConfig{on(s, 0), on(t, 0)}
	r4.Clients[0].Attempts = 0
	r4.Reconfigs = []Reconfig{
		{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1},
		{From: []int{0}, MaxTTL: t.MaxTTL, Factor: t.Factor, To: 1},
	}
	r4.ReconfigRuns = 2
	r4.Pendings = 1
	r4.LiveReconfig = true
	r4.Depth = 8

	// The old settings read from the nodes, and a run that finds the
	// change done: one node in both lists, a lease of S held. Run 1 has
	// the old settings typed and may stop after any step; runs 2 and 3
	// read them from the node (after a stop between the steps, from the
	// change record), and a run after the change finished writes nothing
	// and returns nil ("already done"). No lease of T while the lease of S
	// is trusted, and every run that returns nil leaves a client of T able
	// to lock.
	rd := base
	rd.Nodes = 1
	rd.Clients = []ClientConfig{on(s, 0), on(t, 0)}
	// (While the lease of S is trusted the liveness check waits: see
	// TestReconfig_ReadingTheOldSettingsLeavesTheNewSettingsLive for the
	// same runs without it.)
	rd.Clients[0].Holds = true
	rd.Clients[1].Attempts = 1
	rd.Reconfigs = []Reconfig{
		{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1},
		{From: []int{0}, To: 1, ReadFrom: true},
		{From: []int{0}, To: 1, ReadFrom: true},
	}
	rd.ReconfigRuns = 3
	rd.ReconfigInOrder = true
	rd.Pendings = 1
	rd.LiveReconfig = true
	rd.Depth = 16

	return []Scenario{
		{"reconfig-disjoint", "Theorem 5, a new node list disjoint from the old one, the command stopped or slow at any step: no lease of T while one of S is trusted", r1},
		{"reconfig-bootstrap", "Theorem 5 with a client of T that calls Bootstrap at every start", r1boot},
		{"reconfig-rerun", "Theorem 5 across a stop between the steps and reruns with the right and the wrong old settings", r2},
		{"reconfig-stale", "Theorem 5 after a finished change and a stale run with another node list", r3},
		{"reconfig-same", "liveness: a rerun that returns nil leaves the new settings able to lock", r4},
		{"reconfig-read", "Theorem 5 and liveness with the old settings read from the node by reruns, one of them after the change finished", rd},
		{"reconfig-done", "Theorem 5 when Reconfigure does every step with the right arguments before a client of the new settings meets a new node", reconfigDone()},
	}
}

// KnownDefects returns scenarios with a guard of the protocol taken out,
// at their CI depth, where the explorer finds the defect the guard
// prevents: the reconfiguration's R1-R4, each as the review found it on
// real redis-server, and LockAll's guards (setDefects). (I1, an entry
// re-pointed after its proof, is the
// scenario repointed of Scenarios with Config.NoReplyIdentity.) `make
// model` does not run them (`make model-known` does); the tests require
// each counterexample.
func KnownDefects() []Scenario {
	named := func(name string) Config {
		for _, sc := range reconfigScenarios() {
			if sc.Name == name {
				return sc.Config
			}
		}
		panic(name)
	}
	// Without the change record's check: reconfigure.lua moves any node
	// that carries a reconfiguration's marks.
	noRecord := func(cfg Config) Config {
		cfg.NoChangeRecord = true
		cfg.Patches = map[string]func(string) string{"reconfigure": func(src string) string {
			return strings.Replace(src, "local ours = redis.call('GET', KEYS[3]) == R", "local ours = true", 1)
		}}
		return cfg
	}
	r1 := named("reconfig-disjoint")
	r1.NoJoinMarks = true
	r1boot := named("reconfig-bootstrap")
	r1boot.NoJoinMarks = true
	// R2 without the record: run 2, with the wrong old settings, is taken
	// and does both steps (the prefix), and the search goes on with the
	// clients and time.
	r2 := noRecord(named("reconfig-rerun"))
	r2.ReconfigRuns = 2
	r2.Clients[1].Attempts, r2.Pendings = 2, 2
	r2.Prefix = append(r2.Prefix[:len(r2.Prefix)-8:len(r2.Prefix)-8],
		"node 0 runs reconfigure refuse of Reconfigure (run 2)",
		"node 1 runs reconfigure refuse of Reconfigure (run 2)", "node 2 runs reconfigure refuse of Reconfigure (run 2)",
		"node 0 runs reconfigure hold", "node 1 runs reconfigure hold", "node 2 runs reconfigure hold",
		"client 1 starts TryLock", "node 1 runs acquire of client 1", "node 2 runs acquire of client 1")
	r2.Depth = 36
	r3 := named("reconfig-stale")
	r3.RecordWithoutNodes = true
	for _, ks := range r3.Keys {
		if ch, ok := script.ParseChange(ks[script.TraceKey]); ok {
			ks[script.TraceKey] = script.ChangeRecord(ch.From, ch.To, nil)
		}
	}
	r4 := noRecord(named("reconfig-same"))
	// A node only marked "reconfiguring to T" taken for one that carries
	// T: a rerun after a stop between the steps finds the change done.
	// No lease of S, whose holder would keep the liveness check waiting
	// beyond the bound of real time.
	rd := named("reconfig-read")
	rd.FinishedOnMarks = true
	rd.Clients[0].Attempts = 0
	// Without the change record's old settings: a rerun after a stop
	// between the steps reads the node marked "reconfiguring to T" as
	// carrying T, and step 0 refuses a change from T to T on a node
	// marked for it: no run that reads the settings can finish the
	// change.
	marks := named("reconfig-read")
	marks.OldFromMarks = true
	marks.Clients[0].Attempts = 0

	// An extend round decided after its lease lapsed, counted anyway: the
	// key it re-created stands where another lease was granted and
	// released meanwhile (docs/protocol.md, "Extends re-create what a
	// restart lost").
	lapse, _ := ScenarioNamed("recreate")
	lapse.Config.NoLapseCheck = true

	// release.lua deleting the key whatever it holds: client 0's late
	// release frees client 1's key on nodes 0 and 1, and client 0's
	// second try takes them while client 1's lease is trusted.
	late, _ := ScenarioNamed("late-release")
	late.Config.Patches = map[string]func(string) string{"release": ReleaseWithoutOwnershipCheck}

	return append([]Scenario{
		{"late-release", "release.lua without its ownership check: a release landing after its lease ended deletes the next holder's key", late.Config},
		{"recreate-lapse", "an extend round decided after its lease lapsed, counted: the lease is trusted again across another", lapse.Config},
		{"reconfig-disjoint", "R1: step 1 marks no new node, and a client of T admits a bare new node by the first-admission path", r1},
		{"reconfig-bootstrap", "R1: step 1 marks no new node, and Bootstrap admits a bare new node at once", r1boot},
		{"reconfig-rerun", "R2: without the change record, a rerun with other old settings sizes the hold-off from them", r2},
		{"reconfig-stale", "R3: a change record without the new nodes takes a stale run with another node list for a rerun", r3},
		{"reconfig-same", "R4: without the change record, a rerun with old = new returns nil and the nodes hold off for ever", r4},
		{"reconfig-read-marks", "a run that reads the old settings from a node's marks, not from the change record, reads \"reconfiguring to T\" as T after a stop between the steps and is refused: only typed settings can finish the change", marks},
		{"reconfig-read", "a run that takes a node only marked for the new settings for one that carries them returns \"already done\" after a stop between the steps, and the node holds off for ever", rd},
	}, setDefects()...)
}

// KnownDefectNamed returns the known defect's scenario called name.
func KnownDefectNamed(name string) (Scenario, bool) {
	for _, s := range KnownDefects() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// reconfigDone is the scenario reconfig-done, the control: R2's
// deployment and clients, the right old settings only, a run that does
// every step and a first try of a client of T that meets the held-off
// nodes (the prefix); then the client's checks and time up to the end of
// the hold-off (4 ticks), where it locks on nodes 1 and 2: no double
// grant.
func reconfigDone() Config {
	s := lease(3, 0.01, 1)
	t := lease(1, 0.01, 2)
	t.AfterReconfigure = true
	on := func(cc ClientConfig, nodes ...int) ClientConfig { cc.Servers = nodes; return cc }
	cfg := Config{Admitted: true, Confirm: true, RepliesAtOnce: true, NoGiveUps: true, Pendings: 2, Nodes: 3,
		Clients: []ClientConfig{on(s, 0), on(t, 0, 1, 2)}}
	cfg.Clients[0].Holds = true
	cfg.Reconfigs = []Reconfig{{From: []int{0}, MaxTTL: s.MaxTTL, Factor: s.Factor, To: 1}}
	cfg.ReconfigRuns = 1
	cfg.Prefix = []string{
		"client 0 starts TryLock", "node 0 runs acquire of client 0",
		`the operator runs Reconfigure (run 1) from [0] "` + s.settings(1) + `"`,
		"node 0 runs look of Reconfigure (run 1)", "node 0 runs look of Reconfigure (run 1)",
		"node 1 runs look of Reconfigure (run 1)", "node 2 runs look of Reconfigure (run 1)",
		"node 0 runs reconfigure refuse of Reconfigure (run 1)",
		"node 1 runs reconfigure refuse of Reconfigure (run 1)", "node 2 runs reconfigure refuse of Reconfigure (run 1)",
		"node 0 runs reconfigure hold", "node 1 runs reconfigure hold", "node 2 runs reconfigure hold",
		// the client of T's first try, which meets the held-off nodes
		"client 1 starts TryLock", "node 1 runs acquire of client 1", "node 2 runs acquire of client 1",
	}
	cfg.MaxTime = 4
	cfg.Depth = 29
	return cfg
}

// ReleaseWithoutOwnershipCheck is release.lua deleting the lock key
// whatever value it holds.
func ReleaseWithoutOwnershipCheck(src string) string {
	return strings.Replace(src, "if cur[1] == ARGV[1] or", "if true or", 1)
}
