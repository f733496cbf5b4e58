package chaos

import (
	"context"
	"sync"
	"time"
)

func init() {
	register(&fault{
		name:       "mixed",
		rank:       180,
		doc:        "a seeded schedule of node kills and empty restarts, pauses, partitions, slow links and worker freezes",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "claim-first", 4, 60, Expect{Overlaps: Zero, Lost: Zero})},
		},
		script: mixed,
	})
}

// mixed runs a seeded schedule of faults until the workers are done. At
// most two nodes are impaired at any time (a restarted node counts until
// its quarantine is over), so the quorum always exists.
func mixed(ctx context.Context, e *env) error {
	if err := e.crew.warm(ctx, int64(e.sc.Workers)); err != nil {
		return err
	}
	e.log.mark(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := make([]time.Time, e.cluster.lockN)
	start := time.Now()
	quarantine := quarantineFor(e.sc.TTL)
	for ctx.Err() == nil {
		if err := sleep(ctx, time.Duration(200+e.rng.IntN(300))*time.Millisecond); err != nil {
			return nil
		}
		now := time.Now()
		var free []int
		impaired := 0
		for n, until := range busy {
			if until.After(now) {
				impaired++
			} else {
				free = append(free, n)
			}
		}
		action := e.rng.IntN(5)
		if impaired >= 2 && action != 4 {
			action = 4
		}
		n := -1
		if len(free) > 0 {
			n = free[e.rng.IntN(len(free))]
		}
		at := time.Since(start).Seconds()
		switch action {
		case 0:
			busy[n] = now.Add(quarantine + 500*time.Millisecond)
			e.log.note("t=%.2fs kill -9 node %d, restart empty", at, n)
			node := e.cluster.nodes[n]
			wg.Go(func() { _ = node.Restart(context.WithoutCancel(ctx)) })
		case 1:
			busy[n] = now.Add(400 * time.Millisecond)
			e.log.note("t=%.2fs pause node %d for 300ms", at, n)
			node := e.cluster.nodes[n]
			if err := node.Pause(); err == nil {
				wg.Go(func() { time.Sleep(300 * time.Millisecond); _ = node.Resume() })
			}
		case 2:
			w := e.rng.IntN(e.sc.Workers)
			busy[n] = now.Add(500 * time.Millisecond)
			e.log.note("t=%.2fs blackhole node %d for worker %d for 400ms", at, n, w)
			p := e.cluster.prox[w][n]
			p.Blackhole(true)
			wg.Go(func() { time.Sleep(400 * time.Millisecond); p.Blackhole(false) })
		case 3:
			busy[n] = now.Add(500 * time.Millisecond)
			e.log.note("t=%.2fs node %d 80ms slower for everyone for 400ms", at, n)
			for w := range e.cluster.prox {
				p := e.cluster.prox[w][n]
				p.SetLatency(80 * time.Millisecond)
				wg.Go(func() { time.Sleep(400 * time.Millisecond); p.SetLatency(0) })
			}
		case 4:
			w := e.rng.IntN(e.sc.Workers)
			p := e.crew.procs[w]
			d := e.sc.TTL * 3 / 2
			e.log.note("t=%.2fs freeze worker %d for %v", at, w, d)
			if err := p.freeze(); err == nil {
				wg.Go(func() { time.Sleep(d); _ = p.thaw() })
			}
		}
	}
	return nil
}
