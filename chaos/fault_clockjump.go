package chaos

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(&fault{
		name:       "clock-jump",
		rank:       170,
		doc:        "the holder won exactly 3 nodes; one node's wall clock jumps past the TTL",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {
				doubleGrantRun(Redlock5, "none", 4, expectUnsafe),
				doubleGrantRun(Redlock5, "claim-first", 4, Expect{Lost: Zero, Rejection: true}),
			},
			"quick": {
				doubleGrantRun(Redlock5, "none", 10, expectUnsafe),
				doubleGrantRun(Redlock5, "claim-first", 10, Expect{Lost: Zero, Rejection: true}),
			},
		},
		nodes:   func(specs []RedisSpec) { specs[2].Clock = true },
		worker:  doubleGrantGates,
		prepare: isolateHolder,
		script:  doubleGrant(bareMajority(jumpNode2)),
	})
}

// jumpNode2 moves node 2's wall clock past the holder's key expiry.
func jumpNode2(_ context.Context, e *env) (func(), error) {
	jump := 2*e.sc.TTL + time.Second
	n, ok := e.cluster.nodes[2].(RedisNode)
	if !ok {
		return nil, fmt.Errorf("chaos: node %s has no clock to move", e.cluster.nodes[2].Addr())
	}
	if err := n.JumpClock(jump); err != nil {
		return nil, err
	}
	how := ""
	if t, ok := e.cluster.nodes[2].(interface{ ClockTool() string }); ok {
		how = " with " + t.ClockTool()
	}
	e.log.note("holder locked nodes 0,1,2; node 2's clock jumped %v forward%s", jump, how)
	time.Sleep(5 * time.Millisecond) // the shim looks at its offset file at most every 2ms
	return nil, nil
}
