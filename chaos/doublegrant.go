package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The double-grant faults (restart-*, failover, clock-jump) script one
// holder and one challenger so that the fault lands inside a live lease,
// and the challenger tries while that lease is valid:
//
//  1. the challenger (worker 1) waits at its start, the holder (worker 0)
//     takes the lock and stops at its "locked" gate, telling the script
//     its lease's deadline;
//  2. the fault strikes (the strike returns once it took effect);
//  3. the holder reads the counter and stops at "read", and the
//     challenger calls Lock, both at once;
//  4. the script waits for the challenger's "locked" gate until the
//     holder's deadline. A challenger granted before it is a double grant
//     by construction: it finishes a section, then the holder writes on
//     its stale read. A challenger refused all that time (the safe runs)
//     is let go only after the holder wrote and released.
//
// Nothing is left to a race: the only time the construction needs is the
// strike, the holder's read and one acquire round of the challenger
// within one lease of engTTL, and a strike that would take longer (a
// process start) is done before the lease (see fault_restart.go). A
// challenger granted too late fails the run with the reason in its notes,
// not as a silently missing violation.

// engTTL is the TTL of the double-grant runs: long enough to script a
// fault inside one lease.
const engTTL = 1200 * time.Millisecond

// engNodeTimeout is the per-node timeout of the double-grant workers.
// The topology's own (15% of the TTL, 180 ms; 100 ms on one node) lets a
// loaded machine fail the challenger's first acquire round, which dials
// every node afresh: the Lock call then waits for the holder's release
// or expiry, and the run shows no double grant. Only slow calls wait
// longer for it; no node is silent in these runs while anyone locks.
const engNodeTimeout = engTTL / 2

// doubleGrantRun is a double-grant run: one holder, one challenger.
func doubleGrantRun(topo, mode string, sections int, e Expect) Scenario {
	s := newRun(topo, mode, 2, sections, e)
	s.TTL = engTTL
	return s
}

// doubleGrantGates stops the holder where the fault strikes and before
// its write, and the challenger before it tries and once it is granted.
func doubleGrantGates(w int, cfg *workerConfig) {
	gated([]gatePoint{gateLocked, gateRead}, []gatePoint{gateStart, gateLocked})(w, cfg)
	cfg.NodeMs = int(engNodeTimeout.Milliseconds())
}

// doubleGrant returns the script of a double-grant fault. strike makes
// the holder's lease lose its majority; after, if not nil, runs when the
// script ends (a pending restart, say).
func doubleGrant(strike func(ctx context.Context, e *env) (after func(), err error)) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		h, w := e.crew.holder(), e.crew.others()[0]
		if _, err := w.waitGate(ctx, gateStart, 15*time.Second); err != nil {
			return err
		}
		locked, err := h.waitGate(ctx, gateLocked, 15*time.Second)
		if err != nil {
			return err
		}
		if locked.deadline == 0 {
			return errors.New("chaos: the holder's lease has no deadline")
		}
		e.log.mark(true)
		after, err := strike(ctx, e)
		if after != nil {
			defer after()
		}
		if err != nil {
			return err
		}
		if err := firstErr(h.answer(), w.answer()); err != nil {
			return err
		}
		if _, err := h.waitGate(ctx, gateRead, 10*time.Second); err != nil {
			return err
		}
		left := time.Duration(locked.deadline - stampNs())
		granted, err := w.waitGate(ctx, gateLocked, max(left, time.Millisecond))
		switch {
		case err == nil && granted.deadline > 0:
			in := time.Duration(locked.deadline - (granted.deadline - int64(e.sc.TTL)))
			e.log.note("challenger granted while the holder's lease was valid (about %v of it left at the challenger's acquire)", in.Round(time.Millisecond))
			if err := w.answer(); err != nil {
				return err
			}
			if !w.waitDone(ctx, 1, 10*time.Second) {
				return errors.New("chaos: the challenger did not finish its section within 10s of its grant")
			}
			e.log.mark(false)
			return h.answer()
		case errors.Is(err, errGateTimeout):
			// Refused for the whole lease: the holder writes and
			// releases first, then the challenger goes on.
			e.log.note("challenger not granted while the holder's lease was valid (%v after the strike was done)", max(left, 0).Round(time.Millisecond))
			e.log.mark(false)
			if err := h.answer(); err != nil {
				return err
			}
			if !h.waitDone(ctx, 1, 10*time.Second) {
				return errors.New("chaos: the holder did not finish its section within 10s")
			}
			if _, err := w.waitGate(ctx, gateLocked, 15*time.Second); err != nil {
				return err
			}
			return w.answer()
		case err == nil:
			return fmt.Errorf("chaos: the challenger's lease has no deadline")
		default:
			return err
		}
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
