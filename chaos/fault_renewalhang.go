package chaos

import (
	"context"
	"time"
)

// hangTTL is the TTL of the renewal-hang runs. With the quick profile's
// 200 ms (a 30 ms node timeout, a renewal every 67 ms) a stress run with
// four busy loops failed renewals before the cap and the others got in
// after 370 ms: the run then shows the load, not the cap. A 1 s TTL leaves
// a renewal hundreds of milliseconds to land.
const hangTTL = time.Second

// holdCap is the WithMaxHold of the renewal-hang runs: three TTLs, so
// that waiting for it is clearly renewal at work and not one TTL.
const holdCap = 3 * hangTTL

func init() {
	register(&fault{
		name:       "renewal-hang",
		rank:       160,
		doc:        "the holder's section hangs while Do keeps extending its lease, until the hold cap (WithMaxHold) stops it",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"smoke": {hangRun("none", 6, Expect{})},
			"quick": {
				hangRun("none", 10, Expect{Lost: Positive}),
				hangRun("claim-first", 10, Expect{Lost: Zero, Rejection: true}),
			},
		},
		worker: func(w int, cfg *workerConfig) {
			cfg.HoldMs = int(holdCap.Milliseconds()) // every worker runs its sections under Do
			hangGates(w, cfg)
		},
		script: renewalHang,
	})
}

// hangGates stop the holder once it holds the lock and after its read,
// and the others before they try, on their first attempt.
var hangGates = gated([]gatePoint{gateLocked, gateRead}, []gatePoint{gateStart})

// hangRun is a renewal-hang run of three workers with hangTTL.
func hangRun(mode string, sections int, e Expect) Scenario {
	s := newRun(Redlock5, mode, 3, sections, hang(e))
	s.TTL = hangTTL
	return s
}

// hang adds what every renewal-hang run must show to e: no two valid
// leases, and the others blocked past one TTL (renewal kept the hung
// holder's lease) but not much past the hold cap plus one TTL. The block
// counts from the holder's grant, as the hold cap does: counted from when
// the others start, it lost the time the holder took to read, which grows
// with load (at a load average of 19 a run failed with 550 ms). The
// upper bound leaves 500 ms for the others' first section after the
// lease ended (with a 600 ms cap, up to 1,107 ms from the grant were seen
// at a load of 24).
func hang(e Expect) Expect {
	e.Overlaps, e.MinBlock, e.MaxBlock = Zero, holdCap, holdCap+hangTTL+500*time.Millisecond
	return e
}

// renewalHang holds the holder's section between its read and its write
// (the process runs on: its Do keeps extending the lease) and measures how
// long the others wait. The hold cap ends the lease; once the others have
// done a few sections, the hung section resumes and writes on its stale
// read.
func renewalHang(ctx context.Context, e *env) error {
	h := e.crew.holder()
	if _, err := h.waitGate(ctx, gateLocked, 15*time.Second); err != nil {
		return err
	}
	locked := time.Now() // after the grant: a block counted from here is not longer than the lease
	if err := h.answer(); err != nil {
		return err
	}
	t0, err := blockOthers(ctx, e, gateRead, func() error { return nil }, "while the holder hung")
	if err != nil {
		return err
	}
	e.log.setBlocked(e.log.blockedFor() + t0.Sub(locked))
	for e.crew.done() < 3 && time.Since(t0) < 10*time.Second {
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	e.log.note("holder's section hung after its read for %v with Do extending its lease (TTL %v, hold cap %v); the first other section finished %v after the holder's grant",
		time.Since(t0).Round(time.Millisecond), e.sc.TTL, holdCap, e.log.blockedFor().Round(time.Millisecond))
	e.log.mark(false)
	return e.crew.holder().answer()
}
