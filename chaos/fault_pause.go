package chaos

func init() {
	register(&fault{
		name:       "pause-primary-2",
		rank:       40,
		doc:        "SIGSTOP of two primaries for a while, then SIGCONT",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe)},
		},
		script: window(func(e *env) error {
			return firstErr(e.cluster.nodes[0].Pause(), e.cluster.nodes[1].Pause())
		}, func(e *env) error {
			return firstErr(e.cluster.nodes[0].Resume(), e.cluster.nodes[1].Resume())
		}),
	})
}
