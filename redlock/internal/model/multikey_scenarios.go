package model

// setScenarios are the scenarios of one lease over several keys
// (multikey.go): two LockAlls over the same two keys, listed in both
// orders. On one node a key is taken in two steps, so that both sets can
// be taken one after the other, with time passing and the keys renewed,
// within a bound the tests afford; sets-three runs them over three nodes,
// where one set fits the bound.
func setScenarios() []Scenario {
	// ttl 2 ticks, drift factor 0.01: a key taken a tick after the first
	// is trusted a tick longer, so the set's deadline is the first key's.
	ab := lease(2, 0.01, 1)
	ab.Extends = 1
	ab.Keys = []string{"a", "b"}
	ba := ab
	ba.Keys = []string{"b", "a"}
	// Replies at once and no give-up but the forced ones (a key's
	// attempts used up, a key taken and lapsed or lost): an extend per key
	// and its round multiply the runs. A LockAll gives up through its
	// attempt on its next key, refused: one attempt per key.
	sets := Config{Nodes: 1, Clients: []ClientConfig{ab, ba}, Admitted: true, MaxTime: 2,
		RepliesAtOnce: true, NoGiveUps: true, Live: true, Depth: 13}
	// The same over three nodes, without extends.
	three := sets
	three.Nodes = 3
	three.Symmetry = true
	three.Clients = []ClientConfig{ab, ba}
	three.Clients[0].Extends, three.Clients[1].Extends = 0, 0
	three.Depth = 11
	// All or nothing: a LockAll may give up at any moment (its ctx) and
	// every call runs late or at once; once every call it sent ran, none
	// of its values is left on a node. No time passes: with time, a late
	// acquire may land after its tombstone expired and set a key that
	// expires with its ttl, which the design allows (Config.CheckLeftovers).
	release := Config{Nodes: 1, Clients: []ClientConfig{ab, ba}, Admitted: true, CheckLeftovers: true, Depth: 10}
	release.Clients[0].Extends, release.Clients[1].Extends = 0, 0
	// A LockAll over {a,b} and a single lease on a: the set and the
	// single lease are ordered on a by a's own key.
	single := lease(2, 0.01, 2)
	single.Key = "a"
	mixed := sets
	mixed.Clients = []ClientConfig{ab, single}
	return []Scenario{
		{"sets", "LockAll over {a,b} and {b,a}: no key believed held by two clients (as a lease or in a set), no deadlock, the set trusted only while every key is", sets},
		{"sets-three", "sets over three nodes, without extends", three},
		{"sets-mixed", "a LockAll over {a,b} beside TryLock on a: no key believed held by two clients", mixed},
		{"sets-release", "all or nothing: a LockAll that gives up or releases leaves none of its keys behind once its calls ran", release},
	}
}

// setDefects are LockAll's guards taken out, for KnownDefects.
func setDefects() []Scenario {
	named := func(name string) Config {
		for _, sc := range setScenarios() {
			if sc.Name == name {
				return sc.Config
			}
		}
		panic(name)
	}
	order := named("sets")
	order.NoCanonicalOrder = true
	// The double grant itself, not the set outliving its first key a few
	// steps before.
	last := named("sets")
	last.SetDeadlineFromLast = true
	last.ExclusionOnly = true
	partial := named("sets-release")
	partial.KeepPartialHolds = true
	return []Scenario{
		{"sets-order", "LockAll taking its keys in the order they were listed: {a,b} and {b,a} each hold one and wait for the other", order},
		{"sets-deadline", "the set trusted until the last key's deadline: the first key expires and another client takes it while the set is trusted", last},
		{"sets-partial", "a LockAll that gives up without releasing the keys it took leaves them to nobody until they expire", partial},
	}
}
