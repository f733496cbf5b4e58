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
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe)},
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
		prepare: killThree,
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

// killThree kills three of five primaries before the workers start, and
// times one TryLock against the rest.
func killThree(ctx context.Context, e *env) error {
	for n := range 3 {
		if err := e.cluster.nodes[n].Kill(); err != nil {
			return err
		}
	}
	e.log.mark(true)
	cs := e.cluster.directClients()
	defer closeAll(cs)
	lc, err := redlock.New(cs, redlock.WithMaxTTL(e.sc.TTL))
	if err != nil {
		return err
	}
	defer lc.Close()
	t0 := time.Now()
	l, err := lc.TryLock(ctx, "chaos:probe", e.sc.TTL)
	e.log.lockError(time.Since(t0), err)
	if l != nil {
		_ = l.Release(ctx)
	}
	e.log.note("nodes 0,1,2 killed before the workers started")
	return nil
}
