package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do locks key (waiting like Lock), runs fn while keeping the lease
// extended every ttl/3, and releases it when fn returns. fn's ctx is
// cancelled the moment the lease is lost or its validity ends (an extend
// that failed for long enough), so fn must stop acting as the holder when
// ctx is done. With WithMaxHold, extending stops after that long and fn's
// ctx ends with the last validity. Do returns fn's error, joined with an
// error wrapping ErrNotHeld when the lease was lost before fn returned
// (and ErrMaxHold, or the Extend error, that ended it; context.Cause of
// fn's ctx is the same error), or
// Lock's error when the lock was not obtained. Safe for concurrent use.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lease) error) error {
	if fn == nil {
		return errors.New("redlock: Do: nil fn")
	}
	l, err := c.Lock(ctx, key, ttl)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	keeper := make(chan error, 1)
	go func() { keeper <- c.keep(l, ttl, stop, cancel) }()
	finish := func() (lostErr, relErr error) {
		close(stop)
		lostErr = <-keeper
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
		defer rcancel()
		return lostErr, l.Release(rctx)
	}
	// A panic in fn must not leave the lease renewed forever and this
	// Client's line for the key blocked: stop renewing and release, then
	// let the panic go on.
	finished := false
	defer func() {
		if !finished {
			_, _ = finish()
		}
	}()
	ferr := fn(fctx, l)
	finished = true
	lostErr, rerr := finish()
	if lostErr != nil {
		return errors.Join(ferr, lostErr)
	}
	if rerr != nil && errors.Is(rerr, ErrNotHeld) {
		// The validity ran out while fn was finishing.
		return errors.Join(ferr, rerr)
	}
	return ferr
}

// keep extends l until stop is closed, and cancels fn's context when the
// lease ends first. It returns a non-nil error wrapping ErrNotHeld when the
// lease was lost while fn still ran, and wrapping what ended it: ErrMaxHold,
// or the last Extend error.
func (c *Client) keep(l *Lease, ttl time.Duration, stop <-chan struct{}, cancel context.CancelCauseFunc) error {
	start := c.cfg.clock.Now()
	every := ttl / 3
	var why error // what ended the lease, for the error fn's ctx ends with
	for {
		t := time.NewTimer(every)
		select {
		case <-stop:
			t.Stop()
			return nil
		case <-l.Done():
			t.Stop()
			if why == nil {
				why = errors.New("validity ended")
			}
			err := fmt.Errorf("%w: lease on %q ended while fn was running: %w", ErrNotHeld, l.key, why)
			cancel(err)
			return err
		case <-t.C:
		}
		if c.cfg.maxHold > 0 && c.cfg.clock.Now().Sub(start) >= c.cfg.maxHold {
			why = ErrMaxHold
			every = time.Hour // stop extending; Done closes at the deadline
			continue
		}
		ctx, ecancel := context.WithTimeout(context.Background(), max(c.nodeTimeout(ttl), every/2))
		err := l.Extend(ctx, ttl)
		ecancel()
		if err != nil {
			why = err
			c.cfg.logger.Warn("redlock: extend failed", "key", l.key, "err", err)
			// A transient failure retries soon; ErrNotHeld closed Done.
			every = max(ttl/10, time.Millisecond)
			continue
		}
		every = ttl / 3
	}
}
