package chaos

import (
	"context"
	"time"
)

// The double-grant faults (restart-*, failover, clock-jump) script one
// holder and one challenger so that the fault lands inside a live lease:
// the holder (worker 0) takes the lock and stops at its "locked" gate;
// the fault strikes; the holder reads and stops at "read"; then the
// challenger (worker 1) tries, for half the TTL. A challenger that
// got in finishes a section, and the holder's write then rests on a stale
// read. A grant is therefore not luck, and the unsafe runs fail every
// time.

// engTTL is the TTL of the double-grant runs: long enough to script a
// fault inside one lease.
const engTTL = 1200 * time.Millisecond

// doubleGrantRun is a double-grant run: one holder, one challenger.
func doubleGrantRun(topo, mode string, sections int, e Expect) Scenario {
	s := newRun(topo, mode, 2, sections, e)
	s.TTL = engTTL
	return s
}

// doubleGrantGates stops the holder where the fault strikes and before
// its write, and the challenger before it tries.
var doubleGrantGates = gated([]Gate{GateLocked, GateRead}, []Gate{GateStart})

// doubleGrant returns the script of a double-grant fault. strike makes
// the holder's lease lose its majority; after, if not nil, runs when the
// script ends (a pending restart, say).
func doubleGrant(strike func(ctx context.Context, e *env) (after func(), err error)) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		h, w := e.crew.holder(), e.crew.others()[0]
		if _, err := h.waitGate(ctx, GateLocked, 15*time.Second); err != nil {
			return err
		}
		e.log.mark(true)
		after, err := strike(ctx, e)
		if after != nil {
			defer after()
		}
		if err != nil {
			return err
		}
		if err := h.answer(); err != nil {
			return err
		}
		if _, err := h.waitGate(ctx, GateRead, 10*time.Second); err != nil {
			return err
		}
		if _, err := w.waitGate(ctx, GateStart, 10*time.Second); err != nil {
			return err
		}
		if err := w.answer(); err != nil {
			return err
		}
		got := w.waitDone(ctx, 1, e.sc.TTL/2)
		e.log.note("challenger finished a section while the holder's lease was valid: %v", got)
		e.log.mark(false)
		return h.answer()
	}
}

// On five primaries the holder must win exactly nodes 0, 1 and 2, so that
// one of them forgetting the key leaves it without a majority:
// isolateHolder stops its proxies to nodes 3 and 4 (connections refused)
// before it acquires, and bareMajority brings them back once the strike
// is done, before the challenger tries.

func isolateHolder(_ context.Context, e *env) error {
	e.cluster.prox[0][3].Cut(true)
	e.cluster.prox[0][4].Cut(true)
	return nil
}

func bareMajority(strike func(ctx context.Context, e *env) (func(), error)) func(ctx context.Context, e *env) (func(), error) {
	return func(ctx context.Context, e *env) (func(), error) {
		after, err := strike(ctx, e)
		if err != nil {
			return after, err
		}
		e.cluster.prox[0][3].Cut(false)
		e.cluster.prox[0][4].Cut(false)
		return after, nil
	}
}
