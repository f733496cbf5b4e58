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
		doc:        "kill -9 of one primary, which stays down",
		topologies: []string{Redlock5, Etcd3},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe), newRun(Etcd3, "none", 4, 40, expectSafe)},
		},
		script: killNodes(1),
	})
	register(&fault{
		name:       "kill-2",
		rank:       30,
		doc:        "kill -9 of two primaries, which stay down",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {newRun(Redlock5, "none", 3, 15, expectSafe)},
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe)},
		},
		script: killNodes(2),
	})
	register(&fault{
		name:       "kill-3",
		rank:       70,
		doc:        "kill -9 of three primaries: no quorum",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {newRun(Redlock5, "none", 2, 3, Expect{NoQuorum: true})},
			"quick": {newRun(Redlock5, "none", 2, 3, Expect{NoQuorum: true})},
		},
		// Workers give up soon: every lock call must fail.
		worker:  func(_ int, cfg *WorkerConfig) { cfg.LockMs, cfg.MaxFail = 400, 2 },
		prepare: killMajority(3),
	})
	register(&fault{
		name:       "kill-majority",
		rank:       75,
		doc:        "kill -9 of two of three etcd members before the workers start: no quorum",
		topologies: []string{Etcd3},
		runs: map[string][]Scenario{
			"quick": {newRun(Etcd3, "none", 2, 3, Expect{NoQuorum: true})},
		},
		// A member without a leader refuses at once (the workers ask for
		// a leader); the wait only bounds a call that hangs.
		worker:  func(_ int, cfg *WorkerConfig) { cfg.LockMs, cfg.MaxFail = 2000, 2 },
		prepare: killMajority(2),
	})
}

// killNodes returns a script that kills nodes 0..k-1 after warm-up; they
// stay down for the rest of the run.
func killNodes(k int) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
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

// killMajority returns a prepare hook that kills lock nodes 0..k-1, a
// majority, before the workers start, and times one lock attempt against
// the rest.
func killMajority(k int) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
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
