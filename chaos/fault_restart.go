package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
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
		prepare: isolateHolderWithSpare,
		script:  doubleGrant(bareMajority(wipeNode2)),
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
		prepare: isolateHolderWithSpare,
		script:  doubleGrant(bareMajority(wipeNode2)),
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

// isolateHolderWithSpare is isolateHolder, and starts an empty node that
// wipeNode2 puts in node 2's place: the node's restart, with its process
// start, then happens before the holder's lease and not inside it.
func isolateHolderWithSpare(ctx context.Context, e *env) error {
	spare, err := e.backend.StartRedis(ctx, RedisSpec{})
	if spare != nil {
		e.cluster.nodes = append(e.cluster.nodes, spare) // stopped with the others
	}
	if err != nil {
		return err
	}
	return isolateHolder(ctx, e)
}

// wipeNode2 is a restart of node 2 without persistence whose new process
// was started beforehand (isolateHolderWithSpare): it kills node 2 with
// SIGKILL and points every worker's proxy to node 2 at the empty spare,
// which closes their connections. The clients see what they see after a
// restart: node 2 (under its name) dropped their connections and answers
// again at once, without the holder's key. It returns once the spare
// answered PING through the holder's proxy, so the wipe has taken effect
// before anyone goes on; the time a process takes to start (0.1-0.4 s on
// a loaded machine, seconds in a container) is spent before the lease.
func wipeNode2(ctx context.Context, e *env) (func(), error) {
	c := e.cluster
	last := len(c.nodes) - 1
	old, spare := c.nodes[2], c.nodes[last]
	if err := old.Kill(); err != nil {
		return nil, err
	}
	for _, ps := range c.prox {
		ps[2].Retarget(spare.Addr())
	}
	c.nodes[2], c.nodes[last] = spare, old
	if err := pingThrough(ctx, c.prox[0][2].Addr()); err != nil {
		return nil, fmt.Errorf("chaos: node 2's empty replacement: %w", err)
	}
	e.log.note("holder locked nodes 0,1,2; node 2 killed (kill -9) and replaced by an empty redis-server started before the lease")
	return nil, nil
}

// pingThrough sends PING to addr, once it answers, within 5s.
func pingThrough(ctx context.Context, addr string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rc.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		err := rc.Ping(pctx).Err()
		if err == nil || pctx.Err() != nil {
			return err
		}
		if err := sleep(pctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
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
