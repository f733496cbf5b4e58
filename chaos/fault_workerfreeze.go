package chaos

import (
	"context"
	"time"
)

func init() {
	register(&fault{
		name:       "worker-freeze",
		rank:       130,
		doc:        "SIGSTOP of the holder between read and write, past its lease",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {
				newRun(Redlock5, "none", 3, 8, Expect{Lost: Positive}),
				newRun(Redlock5, "claim-first", 3, 8, Expect{Lost: Zero, Rejection: true}),
				newRun(Redlock5, "fence-table", 3, 8, Expect{Lost: Zero}),
			},
			"quick": {
				newRun(Redlock5, "none", 4, 20, Expect{Overlaps: Zero, Lost: Positive}),
				newRun(Redlock5, "write-only", 4, 20, Expect{Overlaps: Zero}),
				newRun(Redlock5, "claim-first", 4, 20, Expect{Overlaps: Zero, Lost: Zero, Rejection: true}),
				newRun(Redlock5, "fence-table", 4, 20, Expect{Overlaps: Zero, Lost: Zero}),
			},
		},
		worker: gated([]Gate{GateRead}, []Gate{GateStart}),
		script: workerFreeze,
	})
}

// workerFreeze stops the holder with SIGSTOP right after it read the
// counter and keeps it stopped past its lease while the others work.
func workerFreeze(ctx context.Context, e *env) error {
	h := e.crew.holder()
	if _, err := h.waitGate(ctx, GateRead, 15*time.Second); err != nil {
		return err
	}
	if err := h.freeze(); err != nil {
		return err
	}
	e.log.mark(true)
	t0 := time.Now()
	if err := h.answer(); err != nil { // read by the worker once it runs again
		return err
	}
	for _, p := range e.crew.others() {
		if _, err := p.waitGate(ctx, GateStart, 10*time.Second); err != nil {
			return err
		}
		if err := p.answer(); err != nil {
			return err
		}
	}
	_ = sleep(ctx, 2*e.sc.TTL)
	// Let the others get some sections in before the holder wakes: the
	// stale write must come after a newer holder's, or there is nothing
	// to refuse. On a loaded machine that can take seconds. With
	// fence-table they wait on the frozen holder's row lock instead, so
	// do not wait long there.
	var others int64
	wait := 10 * time.Second
	if e.sc.Fencing == "fence-table" {
		wait = 3 * time.Second
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		others = e.crew.done() - h.done.Load()
		if others >= 3 {
			break
		}
		_ = sleep(ctx, 5*time.Millisecond)
	}
	e.log.note("holder frozen (SIGSTOP) after its read for %v (lease %v); others did %d sections meanwhile",
		time.Since(t0).Round(time.Millisecond), e.sc.TTL, others)
	e.log.mark(false)
	return h.thaw()
}
