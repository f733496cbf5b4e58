package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do locks key (waiting like Lock), runs fn while keeping the lease
// extended every ttl/3 (sooner while less validity is left, as with a
// lease handed over after a long wait), and releases it when fn returns.
// fn's ctx is cancelled the moment the lease is lost or its validity ends
// (an extend that failed for long enough), so fn must stop acting as the
// holder when ctx is done. With WithMaxHold, extending stops after that
// long and fn's ctx ends with the last validity. Do returns fn's error,
// joined with an
// error wrapping ErrNotHeld when the lease was lost before fn returned
// (and ErrMaxHold, or the Extend error, that ended it; context.Cause of
// fn's ctx is the same error), or
// Lock's error when the lock was not obtained. A release that a majority
// did not confirm (ErrReleaseUnconfirmed) is logged as a Warn, not
// returned: fn's work stands, and the key expires with its ttl. opts apply to the Lock
// call: WaitAtMost bounds the wait for the lock, and only that wait, so a
// fn that runs past the bound goes on with its ctx, derived from ctx. Safe
// for concurrent use.
//
// A Client renews all its Do leases together: the leases due at once go
// to each node at most 256 to a call, and a lease that is over (lost, or
// past its validity) is not renewed again, even while fn still runs.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lease) error, opts ...CallOption) (err error) {
	if fn == nil {
		return errors.New("redlock: Do: nil fn")
	}
	// The span is the parent of Lock's and of fn's own spans.
	ctx, span := c.startSpan(ctx, "quorumlock.Do", key, ttl)
	outcome := "ok"
	defer func() { doEnded(span, outcome, err) }()
	l, err := c.Lock(ctx, key, ttl, opts...)
	if err != nil {
		outcome = outcomeOf(err)
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.renew.add(l, ttl)
	stop := make(chan struct{})
	watch := make(chan error, 1)
	go func() { watch <- c.watch(l, stop, cancel) }()
	finish := func() (lostErr, relErr error) {
		close(stop)
		lostErr = <-watch
		c.renew.remove(l)
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
	if ferr != nil {
		outcome = "error"
	}
	if lostErr != nil {
		outcome = "lost"
		if errors.Is(ferr, lostErr) {
			// fn returned the cause of its ctx (or wrapped it), as it
			// should: it already says why the lease ended.
			return ferr
		}
		return errors.Join(ferr, lostErr)
	}
	if rerr != nil && errors.Is(rerr, ErrNotHeld) {
		// The validity ran out while fn was finishing.
		outcome = "lost"
		return errors.Join(ferr, rerr)
	}
	if rerr != nil {
		// fn ran as the holder to the end: that the key may stay on some
		// nodes until it expires (ErrReleaseUnconfirmed) delays the next
		// holder, it does not undo fn's work, so Do does not fail for it.
		c.cfg.logger.Warn("redlock: release after Do not confirmed by a majority", "key", keyText(key), "err", rerr.Error())
	}
	return ferr
}

// TryDo is Do with one attempt, as TryLock makes: when someone else holds
// key it returns an error wrapping ErrNotObtained at once, without running
// fn. It is what a job that must skip its run while another copy of it
// runs wants. WaitAtMost above 0 and WithCallRetry are refused, as by
// TryLock, before any node is touched. Safe for concurrent use.
func (c *Client) TryDo(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lease) error, opts ...CallOption) error {
	cc, err := c.callConfig(opts)
	if err != nil {
		return err
	}
	if err := cc.onlyOnce("TryDo"); err != nil {
		return err
	}
	return c.Do(ctx, key, ttl, fn, append(opts[:len(opts):len(opts)], WaitAtMost(0))...)
}

// watch cancels fn's context when l ends before stop is closed, with an
// error wrapping ErrNotHeld and what ended it (ErrMaxHold, or the last
// renewal error), which it also returns; nil when fn returned first.
func (c *Client) watch(l *Lease, stop <-chan struct{}, cancel context.CancelCauseFunc) error {
	select {
	case <-stop:
		return nil
	case <-l.Done():
		why := c.renew.why(l)
		var err error
		if errors.Is(why, ErrNotHeld) {
			// The renewal said "lease not held" already: once is enough.
			err = fmt.Errorf("redlock: lease on %s ended while fn was running: %w", keyText(l.key), why)
		} else {
			err = fmt.Errorf("%w: lease on %s ended while fn was running: %w", ErrNotHeld, keyText(l.key), why)
		}
		cancel(err)
		return err
	}
}
