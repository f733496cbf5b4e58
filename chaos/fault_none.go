package chaos

func init() {
	register(&fault{
		name:       "none",
		rank:       10,
		doc:        "no fault",
		topologies: []string{Single, SingleReplica, Redlock5},
		runs: map[string][]Scenario{
			"quick": {
				newRun(Redlock5, "none", 4, 40, Expect{Overlaps: Zero}),
				newRun(Single, "none", 4, 40, Expect{Overlaps: Zero}),
			},
		},
	})
}
