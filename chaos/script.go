package chaos

import (
	"context"
	"fmt"
	"time"
)

// What the fault scripts share: waiting, a fault window, and holding the
// others back while the holder is struck.

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// faultWindow is how long pause-primary-2 and partition-2 last. Two
// seconds, not one: with two nodes silent the client grants only a few
// locks per second (see docs/chaos.md), and the run must see some.
const faultWindow = 2 * time.Second

// window returns a script that applies a fault after warm-up for
// faultWindow, then heals it.
func window(on, off func(e *env) error) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
			return err
		}
		e.log.mark(true)
		before := e.crew.done()
		if err := on(e); err != nil {
			return err
		}
		err := sleep(ctx, faultWindow)
		e.log.mark(false)
		e.log.note("fault on for %v after %d sections; %d sections finished meanwhile", faultWindow, before, e.crew.done()-before)
		return firstErr(off(e), err)
	}
}

// blockOthers waits for the holder (worker 0) at gate and the others at
// their start, applies fault to the holder, lets the others try, and
// records how long it took until one of them finished a section (the lock
// was obtained about one section earlier). It returns when the others
// started trying.
func blockOthers(ctx context.Context, e *env, gate gatePoint, fault func() error, what string) (time.Time, error) {
	if _, err := e.crew.holder().waitGate(ctx, gate, 15*time.Second); err != nil {
		return time.Time{}, err
	}
	for _, p := range e.crew.others() {
		if _, err := p.waitGate(ctx, gateStart, 10*time.Second); err != nil {
			return time.Time{}, err
		}
	}
	if err := fault(); err != nil {
		return time.Time{}, err
	}
	t0 := time.Now()
	e.log.mark(true)
	for _, p := range e.crew.others() {
		if err := p.answer(); err != nil {
			return t0, err
		}
	}
	for e.crew.done() == 0 {
		if time.Since(t0) > 10*time.Second {
			return t0, fmt.Errorf("chaos: no worker got the lock within 10s %s", what)
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return t0, err
		}
	}
	e.log.setBlocked(time.Since(t0))
	return t0, nil
}

// gated returns a worker hook that stops the holder (worker 0) at the
// holder gates and every other worker at the others' gates, on their
// first attempt only.
func gated(holder, others []gatePoint) func(w int, cfg *workerConfig) {
	return func(w int, cfg *workerConfig) {
		g := others
		if w == 0 {
			g = holder
		}
		if len(g) > 0 {
			cfg.Gates, cfg.GateUntil = g, 1
		}
	}
}
