package chaos

import (
	"context"
	"time"
)

func init() {
	register(&fault{
		name:       "restart-empty",
		rank:       80,
		doc:        "the holder won exactly 3 nodes; one restarts empty while it holds (restart quarantine on)",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {doubleGrantRun(Redlock5, "none", 4, Expect{Overlaps: Zero})},
			"quick": {doubleGrantRun(Redlock5, "none", 10, Expect{Overlaps: Zero})},
		},
		worker:  doubleGrantGates,
		prepare: isolateHolder,
		script:  doubleGrant(bareMajority(restartNode2)),
	})
	register(&fault{
		name:         "restart-empty-no-quarantine",
		rank:         90,
		doc:          "as restart-empty, with the client's restart quarantine off",
		topologies:   []string{Redlock5},
		noQuarantine: true,
		runs: map[string][]Scenario{
			"smoke": {doubleGrantRun(Redlock5, "none", 4, expectUnsafe)},
			"quick": {
				doubleGrantRun(Redlock5, "none", 10, expectUnsafe),
				doubleGrantRun(Redlock5, "claim-first", 10, Expect{Overlaps: Positive, Lost: Zero}),
			},
		},
		worker:  doubleGrantGates,
		prepare: isolateHolder,
		script:  doubleGrant(bareMajority(restartNode2)),
	})
	register(&fault{
		name:         "restart-delayed",
		rank:         100,
		doc:          "as restart-empty, but the node stays down past the TTL before it restarts empty (quarantine off)",
		topologies:   []string{Redlock5},
		noQuarantine: true,
		runs: map[string][]Scenario{
			"quick": {doubleGrantRun(Redlock5, "none", 10, Expect{Overlaps: Zero})},
		},
		worker:  doubleGrantGates,
		prepare: isolateHolder,
		script:  doubleGrant(bareMajority(restartNode2Late)),
	})
	register(&fault{
		name:         "restart-aof",
		rank:         110,
		doc:          "as restart-empty, but the node runs appendfsync always (quarantine off)",
		topologies:   []string{Redlock5},
		noQuarantine: true,
		runs: map[string][]Scenario{
			"quick": {doubleGrantRun(Redlock5, "none", 10, Expect{Overlaps: Zero})},
		},
		nodes:   func(specs []RedisSpec) { specs[2].AOF = true },
		worker:  doubleGrantGates,
		prepare: isolateHolder,
		script:  doubleGrant(bareMajority(restartNode2)),
	})
}

// restartNode2 kills node 2 and starts it again at once: without AOF it
// comes back empty.
func restartNode2(ctx context.Context, e *env) (func(), error) {
	if err := e.cluster.nodes[2].Restart(ctx); err != nil {
		return nil, err
	}
	e.log.note("holder locked nodes 0,1,2; node 2 restarted (kill -9, start)")
	return nil, nil
}

// restartNode2Late kills node 2 and restarts it empty only once every
// lease granted before could have expired; the script's end restarts it
// if the timer has not yet.
func restartNode2Late(ctx context.Context, e *env) (func(), error) {
	node := e.cluster.nodes[2]
	if err := node.Kill(); err != nil {
		return nil, err
	}
	delay := quarantineFor(e.sc.TTL) + 200*time.Millisecond
	e.log.note("holder locked nodes 0,1,2; node 2 killed, restarts empty after %v", delay)
	t := time.AfterFunc(delay, func() { _ = node.Restart(context.WithoutCancel(ctx)) })
	return func() {
		if t.Stop() {
			_ = node.Restart(context.WithoutCancel(ctx))
		}
	}, nil
}
