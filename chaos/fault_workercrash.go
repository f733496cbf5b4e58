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
		topologies: []string{Single, Redlock5, Etcd3, ZK3, PgAdvisory, PgRow},
		runs: map[string][]Scenario{
			"quick": {
				newRun(Single, "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: quickTTL + 300*time.Millisecond}),
				newRun(Redlock5, "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: quickTTL + 300*time.Millisecond}),
				// The lease outlives its holder by up to its TTL, and the
				// leader looks for expired leases every 500 ms.
				newRun(Etcd3, "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: etcdTTL + 1500*time.Millisecond}),
				// The session outlives its client by its timeout, rounded
				// up to the server's next tick.
				newRun(ZK3, "none", 4, 20, Expect{Overlaps: Zero, MaxBlock: zkTTL + 1500*time.Millisecond}),
				// The kernel closes a killed process's sockets, so the
				// server sees the connection die at once and rolls back.
				newRun(PgAdvisory, "none", 4, 20, Expect{Overlaps: Zero, Lost: Zero, MaxBlock: time.Second}),
				newRun(PgRow, "none", 4, 20, Expect{Overlaps: Zero, Lost: Zero, MaxBlock: time.Second}),
			},
		},
		worker: gated([]gatePoint{gateLocked}, []gatePoint{gateStart}),
		script: workerCrash,
	})
}

// workerCrash kills the holder with SIGKILL while it holds the lock and
// measures how long the others wait for its lease to expire.
func workerCrash(ctx context.Context, e *env) error {
	t0, err := blockOthers(ctx, e, gateLocked, e.crew.holder().kill, "after the holder's crash")
	if err != nil {
		return err
	}
	e.log.mark(false)
	e.log.note("holder killed (SIGKILL) while holding; first section by another worker finished %v later", time.Since(t0).Round(time.Millisecond))
	return nil
}
