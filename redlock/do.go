package redlock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Do locks key (waiting like Lock), runs fn while keeping the lease
// extended every ttl/3 (sooner while less validity is left, as with a
// lease handed over after a long wait), and releases it when fn returns.
// fn's ctx is cancelled the moment the lease is lost or its validity ends
// (an extend that failed for long enough), so fn must stop acting as the
// holder when ctx is done. With WithMaxHold, extending stops after that
// long and fn's ctx ends with the last validity. Do returns fn's error,
// joined with an error wrapping ErrNotHeld when the lease was lost before
// fn returned (and ErrMaxHold, or the Extend error, that ended it;
// context.Cause of fn's ctx is the same error), or Lock's error when the
// lock was not obtained. A lease that was held when fn returned and ran
// out only afterwards, before Do's release landed (a busy host), is no
// loss: Do logs a Warn and returns fn's error, unless a round showed the
// key gone from a majority while the lease was still valid
// (docs/protocol.md, "A lease that runs out after fn returned"). A
// release that a majority did not confirm (ErrReleaseUnconfirmed) is
// logged as a Warn, not returned: fn's work stands, and the key expires
// with its ttl. opts apply to the Lock call: WaitAtMost bounds the wait
// for the lock, and only that wait, so a fn that runs past the bound goes
// on with its ctx, derived from ctx. Safe for concurrent use.
//
// A Client renews all its Do leases together: the leases due at once go
// to each node at most 256 to a call, up to 8 such calls out at once, and
// a lease that is over (lost, or past its validity) is not renewed again,
// even while fn still runs.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lease) error, opts ...CallOption) error {
	if fn == nil {
		return errors.New("redlock: Do: nil fn")
	}
	d, err := c.startDo(ctx, key, ttl, opts)
	if err != nil {
		return err
	}
	return d.run(fn)
}

// doCall is a Do call that holds its lease. fn runs below Do and run
// alone, whose frames keep only a pointer to it: the caller's goroutine
// waits in fn for as long as the lease is held, and a deep stack there
// would stay allocated all that time (see docs/performance.md).
type doCall struct {
	c      *Client
	ctx    context.Context // Do's, with its span
	span   trace.Span
	key    string
	l      *Lease
	fctx   context.Context // fn's
	cancel context.CancelCauseFunc
	watch  chan error // what ended the lease before fn returned (see setOnLoss)
}

// startDo obtains the lease and starts keeping it: renewed, and fn's ctx
// ended the moment the lease ends (setOnLoss calls back then, with no
// goroutine per lease waiting for it meanwhile).
func (c *Client) startDo(ctx context.Context, key string, ttl time.Duration, opts []CallOption) (*doCall, error) {
	// The span is the parent of Lock's and of fn's own spans.
	ctx, span := c.startSpan(ctx, "quorumlock.Do", key, ttl)
	l, err := aside(func() (*Lease, error) { return c.Lock(ctx, key, ttl, opts...) })
	if err != nil {
		doEnded(span, outcomeOf(err), err)
		return nil, err
	}
	d := &doCall{c: c, ctx: ctx, span: span, key: key, l: l, watch: make(chan error, 1)}
	d.fctx, d.cancel = context.WithCancelCause(ctx)
	c.renew.add(l, ttl)
	l.setOnLoss(func() {
		err := c.lossError(l)
		d.cancel(err)
		d.watch <- err
	})
	return d, nil
}

// aside runs f on a goroutine of its own while the caller's waits for
// it: Do and DoAll take their leases this way. Lock's frames (the
// attempt, the node calls, the driver's) go deeper than a new goroutine's
// first stack, and the runtime shrinks a stack it grew only once less than
// a quarter of it is in use, which the caller's frames plus fn's do not
// reach: run on the caller's goroutine, Lock would leave it twice its
// size for as long as fn holds the lease, about 4 KB per Do lease
// (docs/performance.md). The goroutine that ran f ends with it and gives
// its stack back. A panic in f (a logger's or a tracer's, say) goes on in
// the caller's goroutine, with its value, and so does a runtime.Goexit.
func aside[T any](f func() (T, error)) (T, error) {
	type result struct {
		v        T
		err      error
		panicked bool
		p        any
	}
	done := make(chan result, 1)
	go func() {
		r := result{panicked: true}
		defer func() {
			if r.panicked {
				r.p = recover()
			}
			done <- r
		}()
		r.v, r.err = f()
		r.panicked = false
	}()
	r := <-done
	if r.panicked {
		if r.p == nil {
			// Not a panic (panic(nil) recovers a *runtime.PanicNilError):
			// f called runtime.Goexit, as t.FailNow does in a test's hook.
			runtime.Goexit()
		}
		panic(r.p)
	}
	return r.v, r.err
}

// run runs fn as the holder and ends the call.
func (d *doCall) run(fn func(ctx context.Context, l *Lease) error) error {
	// A panic in fn must not leave the lease renewed forever and this
	// Client's line for the key blocked: stop renewing and release, then
	// let the panic go on.
	finished := false
	defer func() {
		if !finished {
			_, _ = d.finish()
			doEnded(d.span, "ok", nil)
		}
	}()
	ferr := fn(d.fctx, d.l)
	held := d.l.heldToEnd()
	finished = true
	return d.end(ferr, held)
}

// finish stops keeping the lease and releases it. lostErr is what ended
// the lease before fn returned, if anything did.
func (d *doCall) finish() (lostErr, relErr error) {
	defer d.cancel(nil)
	c, l := d.c, d.l
	if l.setOnLoss(nil) {
		lostErr = <-d.watch
	}
	c.renew.remove(l)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(d.ctx), c.cfg.cleanup)
	defer rcancel()
	return lostErr, l.Release(rctx)
}

// end finishes the call after fn returned ferr, and returns Do's error.
// held says whether the lease was live and valid when fn returned.
func (d *doCall) end(ferr error, held bool) (err error) {
	outcome := "ok"
	defer func() { doEnded(d.span, outcome, err) }()
	lostErr, rerr := d.finish()
	if held && ranOutAfterFn(lostErr, rerr, d.l) {
		d.c.cfg.logger.Warn("redlock: Do's lease ran out after fn returned, before its release", "key", keyText(d.key), errAttr(errors.Join(lostErr, rerr)))
		lostErr, rerr = nil, nil
	}
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
		// The lease was shown lost (or fn released it itself).
		outcome = "lost"
		return errors.Join(ferr, rerr)
	}
	if rerr != nil {
		// fn ran as the holder to the end: that the key may stay on some
		// nodes until it expires (ErrReleaseUnconfirmed) delays the next
		// holder, it does not undo fn's work, so Do does not fail for it.
		d.c.cfg.logger.Warn("redlock: release after Do not confirmed by a majority", "key", keyText(d.key), "err", rerr.Error())
	}
	return ferr
}

// ranOutAfterFn reports whether what ended a lease after its fn returned
// within the validity (lostErr, or Release's ErrNotHeld in rerr) is only
// the validity running out before the release landed: no round showed a
// majority without our value while the lease was valid (seenMissing), so
// nothing says another holder could have had the key while fn ran, and
// fn's work stands. Do and DoAll then return fn's error alone, as when
// the release came in time (docs/protocol.md, "A lease that runs out
// after fn returned").
func ranOutAfterFn(lostErr, rerr error, ls ...*Lease) bool {
	if lostErr == nil && !errors.Is(rerr, ErrNotHeld) {
		return false
	}
	for _, l := range ls {
		if l.seenMissing() {
			return false
		}
	}
	return true
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

// lossError is Do's error for a lease that ended before fn returned: it
// wraps ErrNotHeld and what ended it (ErrMaxHold, or the last renewal
// error).
func (c *Client) lossError(l *Lease) error {
	why := c.renew.why(l)
	if errors.Is(why, ErrNotHeld) {
		// The renewal said "lease not held" already: once is enough.
		return fmt.Errorf("redlock: lease on %s ended while fn was running: %w", keyText(l.key), why)
	}
	return fmt.Errorf("%w: lease on %s ended while fn was running: %w", ErrNotHeld, keyText(l.key), why)
}

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
	taken, err := aside(func() ([]*held, error) { return c.takeAll(ctx, "DoAll", keys, ttl, opts, false) })
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
	held := s.heldToEnd()
	finished = true
	lostErr, rerr := s.finishDo(ctx)
	if held && ranOutAfterFn(lostErr, rerr, s.leases...) {
		c.cfg.logger.Warn("redlock: DoAll's leases ran out after fn returned, before their release", "keys", s.keysText(), errAttr(errors.Join(lostErr, rerr)))
		lostErr, rerr = nil, nil
	}
	if lostErr != nil {
		if errors.Is(ferr, lostErr) {
			// fn returned its ctx's cause: it says why the set ended.
			return ferr
		}
		return errors.Join(ferr, lostErr)
	}
	if rerr != nil && errors.Is(rerr, ErrNotHeld) {
		// A lease of the set was shown lost.
		return errors.Join(ferr, rerr)
	}
	if rerr != nil {
		c.cfg.logger.Warn("redlock: release after DoAll not confirmed by a majority", "keys", s.keysText(), errAttr(rerr))
	}
	return ferr
}
