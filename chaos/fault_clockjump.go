package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
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
func jumpNode2(ctx context.Context, e *env) (func(), error) {
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
	// The shim looks at its offset file at most every 2ms: wait until
	// node 2 tells the jumped time, so that it has forgotten the holder's
	// key before anyone goes on.
	if err := clockAhead(ctx, e.cluster.nodes[2].Addr(), jump-e.sc.TTL); err != nil {
		return nil, err
	}
	e.log.note("holder locked nodes 0,1,2; node 2's clock jumped %v forward%s", jump, how)
	return nil, nil
}

// clockAhead waits, for at most 5s, until the node at addr tells a time
// (TIME) at least ahead of this machine's wall clock.
func clockAhead(ctx context.Context, addr string, ahead time.Duration) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rc.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		t, err := rc.Time(cctx).Result()
		if err == nil && time.Until(t) >= ahead {
			return nil
		}
		if cctx.Err() != nil {
			return fmt.Errorf("chaos: node %s's clock is not %v ahead (last TIME: %v, %v)", addr, ahead, t, err)
		}
		if err := sleep(cctx, time.Millisecond); err != nil {
			return err
		}
	}
}
