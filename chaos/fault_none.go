package chaos

func init() {
	register(&fault{
		name:       "none",
		rank:       10,
		doc:        "no fault",
		topologies: []string{Single, SingleReplica, Redlock5, PgAdvisory, PgRow, Etcd3, ZK3},
		runs: map[string][]Scenario{
			// One per lock of docs/chaos.md's table: the lock wait of each
			// without a fault, under the same load.
			"quick": {
				newRun(Redlock5, "none", 4, 40, Expect{Overlaps: Zero}),
				newRun(Single, "none", 4, 40, Expect{Overlaps: Zero}),
				newRun(PgAdvisory, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero}),
				newRun(PgRow, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero}),
				newRun(Etcd3, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero}),
				newRun(ZK3, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero}),
			},
		},
	})
}
