package redlock

import (
	"context"
	"errors"
	"time"
)

// DoAll is Do over a set of keys: it locks every key of keys as LockAll
// does (waiting; all or nothing, in byte order), runs fn while keeping
// every lease renewed in the Client's renewal batches (the keys taken
// first were renewed from the moment they were taken), and releases them
// all when fn returns. fn's ctx is cancelled the moment any one lease is
// lost or ends (its renewal found it lost, its validity ran out, fn
// released it, or an Extend of the set failed), with that cause
// (context.Cause), so fn must stop acting as the holder of every key when
// ctx is done. DoAll returns fn's error, joined with an error wrapping
// ErrNotHeld that names the key whose lease ended when the set ended
// before fn returned, or LockAll's error when the set was not obtained
// (fn does not run). A release that a majority did not confirm is logged
// as a Warn, not returned, as by Do. opts apply as for LockAll:
// WaitAtMost bounds the wait for the keys, never fn's run. Safe for
// concurrent use.
func (c *Client) DoAll(ctx context.Context, keys []string, ttl time.Duration, fn func(ctx context.Context, s *LeaseSet) error, opts ...CallOption) error {
	if fn == nil {
		return errors.New("redlock: DoAll: nil fn")
	}
	taken, err := c.takeAll(ctx, "DoAll", keys, ttl, opts, false)
	if err != nil {
		return err
	}
	// The keys taken first are renewed already: the renewal that kept them
	// while waiting goes on, and the last key joins it.
	c.keepWhileWaiting(taken, true)
	c.renew.add(taken[len(taken)-1].l, ttl)
	s, err := c.completeSet(ctx, "DoAll", taken)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.setOnEnd(func(why error) { cancel(why) })

	// A panic in fn must not leave the leases renewed forever: stop
	// renewing and release, then let the panic go on.
	finished := false
	defer func() {
		if !finished {
			_, _ = s.finishDo(ctx)
		}
	}()
	ferr := fn(fctx, s)
	finished = true
	lostErr, rerr := s.finishDo(ctx)
	if lostErr != nil {
		if errors.Is(ferr, lostErr) {
			// fn returned its ctx's cause: it says why the set ended.
			return ferr
		}
		return errors.Join(ferr, lostErr)
	}
	if rerr != nil && errors.Is(rerr, ErrNotHeld) {
		// A validity ran out while fn was finishing.
		return errors.Join(ferr, rerr)
	}
	if rerr != nil {
		c.cfg.logger.Warn("redlock: release after DoAll not confirmed by a majority", "keys", s.keysText(), errAttr(rerr))
	}
	return ferr
}

// finishDo stops DoAll's renewal of the set and releases it. lostErr is
// what ended the set before fn returned, if anything did.
func (s *LeaseSet) finishDo(ctx context.Context) (lostErr, relErr error) {
	_, lostErr = s.setOnEnd(nil)
	for _, l := range s.leases {
		s.c.renew.remove(l)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.cfg.cleanup)
	defer cancel()
	return lostErr, s.Release(rctx)
}
