package chaos

func init() {
	register(&fault{
		name:       "partition-2",
		rank:       50,
		doc:        "every client cut off (blackholed) from two primaries of its own for a while",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {newRun(Redlock5, "none", 3, 15, expectSafe)},
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe)},
		},
		// Each client loses two nodes of its own: the clients disagree on
		// which nodes are reachable, and every one still sees three.
		script: window(func(e *env) error {
			for w, ps := range e.cluster.prox {
				ps[(2*w)%5].Blackhole(true)
				ps[(2*w+1)%5].Blackhole(true)
			}
			return nil
		}, func(e *env) error {
			for _, ps := range e.cluster.prox {
				for _, p := range ps {
					p.Heal()
				}
			}
			return nil
		}),
	})
}
