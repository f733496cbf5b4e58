package chaos

import (
	"context"
	"time"
)

func init() {
	register(&fault{
		name:       "worker-crash",
		rank:       150,
		doc:        "kill -9 of the holder: the lock is never released",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: quickTTL + 300*time.Millisecond})},
		},
		worker: gated([]Gate{GateLocked}, []Gate{GateStart}),
		script: workerCrash,
	})
}

// workerCrash kills the holder with SIGKILL while it holds the lock and
// measures how long the others wait for its lease to expire.
func workerCrash(ctx context.Context, e *env) error {
	t0, err := blockOthers(ctx, e, GateLocked, e.crew.holder().kill, "after the holder's crash")
	if err != nil {
		return err
	}
	e.log.mark(false)
	e.log.note("holder killed (SIGKILL) while holding; first section by another worker finished %v later", time.Since(t0).Round(time.Millisecond))
	return nil
}
