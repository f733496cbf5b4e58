package chaos

import (
	"context"
	"time"
)

func init() {
	register(&fault{
		name:       "freeze-acquire",
		rank:       140,
		doc:        "SIGSTOP of a worker while its acquire round is in flight",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 20, Expect{Overlaps: Zero})},
		},
		worker: gated([]gatePoint{gateStart}, nil),
		script: freezeAcquire,
	})
}

// freezeAcquire stops a worker while its acquire round is in flight (its
// replies are slowed to make the round last), for two TTLs.
func freezeAcquire(ctx context.Context, e *env) error {
	h := e.crew.holder()
	if _, err := h.waitGate(ctx, gateStart, 15*time.Second); err != nil {
		return err
	}
	if err := e.crew.warm(ctx, 3); err != nil {
		return err
	}
	for _, p := range e.cluster.prox[0] {
		p.SetLatency(15 * time.Millisecond)
	}
	e.log.mark(true)
	if err := h.answer(); err != nil {
		return err
	}
	time.Sleep(5 * time.Millisecond)
	if err := h.freeze(); err != nil {
		return err
	}
	_ = sleep(ctx, 2*e.sc.TTL)
	for _, p := range e.cluster.prox[0] {
		p.SetLatency(0)
	}
	e.log.mark(false)
	e.log.note("worker 0 frozen 5ms into an acquire round (15ms replies) for %v", 2*e.sc.TTL)
	return h.thaw()
}
