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
	deadline := Config{Nodes: 3, Clients: []ClientConfig{d, d}, Admitted: true, MaxTime: 2, Depth: 8, Symmetry: true}
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
	return []Scenario{
		{"restart", "Theorem 3: a node that lost its data grants nothing while a lease it granted is trusted", restart},
		{"clocks", "assumption 1: the drift margin covers node clocks that run ahead of the holder's", clocks},
		{"deadline", "a lease's deadline counts from the start of its round", deadline},
		{"settings", "a client whose settings differ from the deployment's gets no lease", settings},
		{"fencing", "Theorems 1 and 2: tokens follow grant order and never repeat", fencing},
		{"tokens", "Theorem 1 with no time between two leases: the fence alone orders their tokens", tokens},
		{"bootstrap", "Theorem 3, Bootstrap's case: Bootstrap admits no node of a deployment in use", bootstrap},
		{"identity", "one server, one vote: a server listed twice counts once", identity},
	}
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
