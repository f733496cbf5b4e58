package model

import "time"

// Scenario is one clean configuration of the protocol: the tests explore
// it at its CI depth (no counterexample allowed) and, with a defect put
// back in, require the counterexample; `make model` explores it deeper.
type Scenario struct {
	Name   string
	Checks string // what it checks, in words
	Config Config
}

// lease is a client with a ttl (and max ttl) of n ticks and drift factor
// f, making attempts TryLock calls.
func lease(n int, f float64, attempts int) ClientConfig {
	d := time.Duration(n) * Unit
	return ClientConfig{TTL: d, MaxTTL: d, Factor: f, Attempts: attempts}
}

// Scenarios returns the clean configurations, at their CI depth.
func Scenarios() []Scenario {
	c := lease(5, 0.01, 1)
	restart := Config{Nodes: 3, Clients: []ClientConfig{c, c}, Admitted: true, Wipes: 1, Pendings: 1, Depth: 9, Symmetry: true}
	// One node's clock may run a tick ahead, two ticks pass, and the drift factor
	// makes the drift margin a whole tick.
	t := lease(2, 0.5, 1)
	clocks := Config{Nodes: 3, Clients: []ClientConfig{t, t}, Admitted: true, Skew: 1, SkewedNodes: 1, MaxTime: 2, Depth: 8, Symmetry: true}
	// No skew and a small drift factor: a round that took a tick still
	// wins, with a tick of validity left.
	d := lease(2, 0.01, 1)
	deadline := Config{Nodes: 3, Clients: []ClientConfig{d, d}, Admitted: true, MaxTime: 2, Depth: 8, Symmetry: true, Live: true}
	// Client 1 was built with a drift factor that leaves it no margin for
	// the clocks: its settings differ, and the nodes must refuse it.
	settings := clocks
	settings.Clients = []ClientConfig{t, d}
	// Fencing: two fenced leases one after the other, the first expiring
	// after one tick (a lease takes five steps with its commit round, so
	// this needs depth 11).
	f := lease(1, 0.01, 1)
	f.Fencing = true
	fencing := Config{Nodes: 3, Clients: []ClientConfig{f, f}, Admitted: true, MaxTime: 1, Depth: 11, Symmetry: true}
	// Two fenced leases of one client in a row with no time passing, so
	// that the time floor (the node's TIME) cannot order their tokens:
	// only the fence the first commit wrote can. The second lease needs
	// the first one's release to run on a node, so this needs depth 12.
	seq := f
	seq.Attempts = 2
	tokens := Config{Nodes: 3, Clients: []ClientConfig{seq}, Admitted: true, Depth: 12, Symmetry: true}
	// Client 0 may extend its lease once (with its ttl), while client 1
	// contends: an extend never brings back a key that expired or was
	// taken, and never lets the holder trust beyond the keys it renewed.
	e := d
	e.Extends = 1
	extend := Config{Nodes: 3, Clients: []ClientConfig{e, d}, Admitted: true, MaxTime: 2, Depth: 9, Symmetry: true, Live: true}
	// Client 0's lease misses node 2 (its acquire there is still on the
	// wire), so its extend may name node 2 for re-creation; client 1
	// contends. An extend round decided after the lease lapsed must count
	// for nothing: its re-created key may stand where client 1 was
	// granted and released meanwhile. Replies at once and no give-ups
	// keep the 13 steps that takes within the bound.
	re := d
	re.Extends = 1
	recreate := Config{Nodes: 3, Clients: []ClientConfig{re, d}, Admitted: true, MaxTime: 2, Depth: 13, Symmetry: true,
		RepliesAtOnce: true, NoGiveUps: true,
		Prefix: []string{"client 0 starts TryLock", "node 0 runs acquire of client 0", "node 1 runs acquire of client 0"}}
	// One node, so that a wiped node's admission and a second attempt fit
	// the bound: the admit script's checks alone stand between the wipe
	// and a second grant.
	again := c
	again.Attempts = 2
	admit := Config{Nodes: 1, Clients: []ClientConfig{c, again}, Admitted: true, Wipes: 1, Pendings: 1, Depth: 12}
	// Two fenced clients, no time passing, replies at once: a lease's
	// commit counts only on nodes that hold its key, or a node the other
	// client read before that commit counts towards both tokens.
	commit := Config{Nodes: 3, Clients: []ClientConfig{f, f}, Admitted: true, RepliesAtOnce: true, Depth: 12, Symmetry: true}
	// Assumption 1 lifted: two node clocks may jump a whole ttl ahead, so
	// two fenced leases can overlap; their tokens must still differ and
	// follow grant order (Theorems 1 and 2 use no clock). No time passes,
	// so the time floor gives both leases the same floor where they read
	// the same clocks: only the fences tell them apart.
	jump := Config{Nodes: 3, Clients: []ClientConfig{f, f}, Admitted: true, Skew: 1, SkewedNodes: 2, ClockJumps: true, RepliesAtOnce: true, Depth: 12, Symmetry: true}
	// The residual case (docs/protocol.md) on one node: client 0 holds a
	// lease, the node is wiped (every node of the deployment), and client
	// 1, built with a max ttl of one tick (other settings), comes first:
	// the node keeps nothing to refuse it with. The scenario is its clean
	// half, client 1 with the deployment's settings and a short ttl: then
	// the quarantine is the deployment's, and client 1 waits it out.
	short := lease(1, 0.01, 2)
	short.MaxTTL = c.MaxTTL
	residual := Config{Nodes: 1, Clients: []ClientConfig{c, short}, Admitted: true, Wipes: 1, Pendings: 1, MaxTime: 2, RepliesAtOnce: true, Depth: 13}
	// Five nodes: the restart scenario's faults, replies at once (a
	// smaller bound).
	five := Config{Nodes: 5, Clients: []ClientConfig{c, c}, Admitted: true, Wipes: 1, Pendings: 1, RepliesAtOnce: true, Depth: 9, Symmetry: true}
	// Three clients, a smaller bound.
	three := Config{Nodes: 3, Clients: []ClientConfig{c, c, c}, Admitted: true, Wipes: 1, Pendings: 1, Depth: 8, Symmetry: true}
	// An operator runs Bootstrap while the clients use the deployment and
	// a node loses its data. Replies arrive at once and no attempt is
	// given up, so that the exploration reaches the 13 steps the defect
	// (Bootstrap admitting a node of a deployment in use) takes.
	bootstrap := Config{Nodes: 3, Clients: []ClientConfig{c, c}, Admitted: true, Wipes: 1, Bootstraps: 1,
		RepliesAtOnce: true, NoGiveUps: true, Depth: 13, Symmetry: true}
	// Client 1's node list names node 0 twice (a host name and its IP)
	// and leaves node 2 out; New's probe heard its entries 0 and 2 only,
	// and two proof rounds may follow. Its entries do not map one to one
	// to the nodes, so no symmetry reduction.
	dup := c
	dup.Servers, dup.Probed = []int{0, 0, 1}, []int{0, 2}
	identity := Config{Nodes: 3, Clients: []ClientConfig{c, dup}, Admitted: true, Proofs: 2,
		RepliesAtOnce: true, NoGiveUps: true, Depth: 12}
	// Client 1's entry 0 reaches node 0 when New verifies it, and is
	// re-pointed at any moment after to node 1, which its entry 1 reaches
	// too (a proxy or a DNS name; go-redis reconnects): the acquire script
	// answers the second SET of its value "already ours", so node 1 would
	// vote twice while client 0 holds a lease on nodes 0 and 2. A proof
	// may follow (the depth lets it end, after both attempts and the
	// re-pointing). Its entries stop mapping one to one to the nodes, so
	// no symmetry reduction.
	moved := c
	moved.Repoint = []int{0, 1}
	// The deployment's only node wiped under a lease of client 0 (every
	// node lost its data), a try of client 1 first, which starts the
	// quarantine, and Bootstrap after it (with Open, a program's every
	// start): Bootstrap must take the pending mark for a sign of use.
	pendingBoot := Config{Nodes: 1, Clients: []ClientConfig{c, again}, Admitted: true, Wipes: 1, Pendings: 1, Bootstraps: 1,
		BootAfterPending: true, RepliesAtOnce: true, NoGiveUps: true, Depth: 13}
	repointed := Config{Nodes: 3, Clients: []ClientConfig{c, moved}, Admitted: true, Proofs: 1,
		RepliesAtOnce: true, NoGiveUps: true, Depth: 12}
	// A release that goes out long after its Release call gave up on it
	// (the library sends a release still queued for a node until its key
	// would have expired: docs/protocol.md, "A release given up on still
	// goes out"): client 0 holds a lease of one tick on nodes 0 and 1 and
	// releases it, its calls still on the wire; time passes, client 1
	// (ttl 3) may be granted, and client 0 may try again. The release
	// deletes only a key that holds its own value, so landing on client
	// 1's key it frees nothing client 0's second try could take. Both
	// clients have the deployment's max ttl of 3 ticks.
	late0 := lease(3, 0.01, 2)
	late0.TTL = Unit
	lateRelease := Config{Nodes: 3, Clients: []ClientConfig{late0, lease(3, 0.01, 1)}, Admitted: true, MaxTime: 2, Depth: 13,
		RepliesAtOnce: true, NoGiveUps: true, Symmetry: true,
		Prefix: []string{"client 0 starts TryLock", "node 0 runs acquire of client 0", "node 1 runs acquire of client 0",
			"client 0 releases its lease"}}
	return append([]Scenario{
		{"late-release", "a release that lands long after its lease ended (after another client's grant) deletes only its own key", lateRelease},
		{"restart", "Theorem 3: a node that lost its data grants nothing while a lease it granted is trusted", restart},
		{"admit", "Theorem 3 on one node: a wiped node is admitted only a quarantine after its pending mark", admit},
		{"residual", "the residual case needs other settings: after every node's data is lost, a client with the deployment's settings waits its quarantine", residual},
		{"five", "Theorem 3 with five nodes", five},
		{"three", "Theorem 3 with three clients", three},
		{"clocks", "assumption 1: the drift margin covers node clocks that run ahead of the holder's", clocks},
		{"deadline", "a lease's deadline counts from the start of its round", deadline},
		{"extend", "an extend renews only keys that still hold the lease's value, counted from the start of its round", extend},
		{"recreate", "an extend that re-creates a key a node lacks counts only if decided while the lease is trusted: no lease is trusted again across another", recreate},
		{"settings", "a client whose settings differ from the deployment's gets no lease", settings},
		{"fencing", "Theorems 1 and 2: tokens follow grant order and never repeat", fencing},
		{"commit", "Theorem 2: two fenced leases in the same instant get different tokens", commit},
		{"jump", "Theorems 1 and 2 with node clocks that jump past a lease: overlapping leases still get different tokens", jump},
		{"tokens", "Theorem 1 with no time between two leases: the fence alone orders their tokens", tokens},
		{"bootstrap", "Theorem 3, Bootstrap's case: Bootstrap admits no node of a deployment in use", bootstrap},
		{"bootstrap-pending", "Bootstrap admits no deployment whose nodes carry a pending mark, though none is admitted", pendingBoot},
		{"identity", "one server, one vote: a server listed twice counts once", identity},
		{"repointed", "one server, one vote when an entry is re-pointed to another entry's server after its proof", repointed},
	}, append(reconfigScenarios(), setScenarios()...)...)
}

// ScenarioNamed returns the scenario called name.
func ScenarioNamed(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
