package chaos

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register(&fault{
		name:       "kill-1",
		rank:       20,
		doc:        "kill -9 of one lock node (a primary, an etcd member, a ZooKeeper server), which stays down",
		topologies: []string{Redlock5, Etcd3, ZK3},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe), newRun(Etcd3, "none", 4, 40, expectSafe),
				newRun(ZK3, "none", 4, 40, expectSafe)},
		},
		script: killNodes(1),
	})
	register(&fault{
		name: "kill-2",
		rank: 30,
		doc: "kill -9 of two lock nodes, which stay down: 3 of 5 primaries still grant; " +
			"2 of 3 etcd members or ZooKeeper servers are a majority, killed before the workers start",
		topologies: []string{Redlock5, Etcd3, ZK3},
		runs: map[string][]Scenario{
			"smoke": {newRun(Redlock5, "none", 3, 15, expectSafe)},
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe), newRun(Etcd3, "none", 2, 3, Expect{NoQuorum: true}),
				newRun(ZK3, "none", 2, 3, Expect{NoQuorum: true})},
		},
		// etcd's client retries a member's "no leader" until the call's
		// deadline, and ZooKeeper's reconnects to a server that is not
		// serving until then, so their refusal takes that long.
		worker:  giveUpWithoutQuorum(2, 2000),
		prepare: killMajority(2),
		script:  killNodes(2),
	})
	register(&fault{
		name:       "kill-3",
		rank:       70,
		doc:        "kill -9 of three primaries before the workers start: no quorum",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {newRun(Redlock5, "none", 2, 3, Expect{NoQuorum: true})},
			"quick": {newRun(Redlock5, "none", 2, 3, Expect{NoQuorum: true})},
		},
		worker:  giveUpWithoutQuorum(3, 400),
		prepare: killMajority(3),
	})
}

// leavesNoQuorum reports whether k of n lock nodes down leave fewer than
// a majority.
func leavesNoQuorum(k, n int) bool { return 2*(n-k) <= n } // fewer than a majority are left

// giveUpWithoutQuorum returns a worker hook for a fault that kills k lock
// nodes: where that leaves no majority, every lock call must fail, so the
// workers wait at most lockMs per call and stop after two failures.
func giveUpWithoutQuorum(k, lockMs int) func(int, *workerConfig) {
	return func(_ int, cfg *workerConfig) {
		if leavesNoQuorum(k, len(cfg.Nodes)) {
			cfg.LockMs, cfg.MaxFail = lockMs, 2
		}
	}
}

// killNodes returns a script that kills nodes 0..k-1 after warm-up; they
// stay down for the rest of the run. Where that leaves no majority,
// killMajority has killed them before the workers started instead.
func killNodes(k int) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if leavesNoQuorum(k, e.cluster.lockN) {
			return nil
		}
		if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
			return err
		}
		e.log.mark(true)
		for n := range k {
			if err := e.cluster.nodes[n].Kill(); err != nil {
				return err
			}
		}
		e.log.note("killed node(s) 0..%d for the rest of the run", k-1)
		return nil
	}
}

// killMajority returns a prepare hook that, where k lock nodes are a
// majority, kills nodes 0..k-1 before the workers start and times one
// lock attempt against the rest (elsewhere killNodes kills them later).
func killMajority(k int) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if !leavesNoQuorum(k, e.cluster.lockN) {
			return nil
		}
		for n := range k {
			if err := e.cluster.nodes[n].Kill(); err != nil {
				return err
			}
		}
		e.log.mark(true)
		t0 := time.Now()
		err := e.topo.probe(ctx, e.cluster, e.sc.TTL)
		e.log.lockError(time.Since(t0), err)
		e.log.note("nodes 0..%d of %d killed before the workers started", k-1, e.cluster.lockN)
		return nil
	}
}

// probeRedlock tries one TryLock on the lock nodes.
func probeRedlock(ctx context.Context, c *cluster, ttl time.Duration) error {
	cs := c.directClients()
	defer closeAll(cs)
	lc, err := redlock.New(cs, redlock.WithMaxTTL(ttl))
	if err != nil {
		return err
	}
	defer lc.Close()
	l, err := lc.TryLock(ctx, "chaos:probe", ttl)
	if l != nil {
		_ = l.Release(ctx)
	}
	return err
}
