package chaos

import "time"

// The nemesis is the randomized multi-client test: lock
// clients that differ the ways a real fleet's do, under a seeded schedule
// of the node faults the lock must survive, checked for what must never
// happen. docs/chaos.md describes it; `make soak` runs it for hours.

func init() {
	register(&fault{
		name: "nemesis",
		rank: 200,
		doc: "clients that differ the ways real fleets do (node names, order and network, fencing on and off, Do with Extend, " +
			"panics in fn, misconfigured max ttl and drift) under a seeded schedule of empty and rolling restarts, pauses, " +
			"partitions, slow links and worker freezes",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"soak": {nemesisRun(time.Minute)},
		},
		worker: nemesisWorker,
		script: nemesisWith(nemesisKinds),
		judge:  judgeNemesis,
	})
	// The same with the restart quarantine off in every client: what the
	// nemesis finds when the lock is broken, so that its zeros mean
	// something. Without the quarantine the nodes do not check the
	// clients' settings either, so the misconfigured clients are granted
	// too; the judge leaves the clients alone here.
	noQ := nemesisRun(45 * time.Second)
	noQ.Expect = Expect{Overlaps: Positive}
	register(&fault{
		name:         "nemesis-no-quarantine",
		rank:         210,
		doc:          "as nemesis, with the clients' restart quarantine off: nodes restarted empty grant locks they forgot",
		topologies:   []string{Redlock5},
		noQuarantine: true,
		runs:         map[string][]Scenario{"quick": {noQ}},
		worker:       nemesisWorker,
		script:       nemesisWith(restartHeavy),
		judge:        judgeNemesis,
	})
}

// nemesisRun is a nemesis run of duration d. The fenced clients share
// counter row 1 under claim-first, so none of their updates may be lost.
func nemesisRun(d time.Duration) Scenario {
	s := newRun(Redlock5, "claim-first", len(nemesisClients), 1, Expect{Overlaps: Zero, Lost: Zero, Granted: true})
	// A ttl well above the time a node takes to restart (0.1-0.4 s on a
	// loaded machine here): with 200 ms every lease a restart could make
	// a node forget has expired before the node answers again, and the
	// nemesis would find nothing even without the quarantine.
	s.Duration, s.TTL = d, nemesisTTL
	return s
}

// nemesisTTL is the nemesis's lease ttl, and the deployment's max ttl.
const nemesisTTL = time.Second
