package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TryLock makes one attempt to lock key for ttl: one parallel round to
// every node (two with fencing), returning as soon as a majority granted
// or that became impossible, without waiting for slow nodes, and never
// longer than the node timeout per round whatever the redis clients'
// options. On failure it returns a *NotObtainedError (errors.Is
// ErrNotObtained) with a *NodeError per node that did not grant, and
// releases whatever it took on every node. When nodes are in quarantine
// because they are new, it starts their admission and tries once more if
// that admitted them. A node admitted under other deployment settings
// gives a *ConfigError (ErrConfigMismatch) instead. An empty key or a key
// in quorumlock's namespace (the prefix quorumlock:) is an *InputError
// matching ErrInvalidKey, a ttl not positive, not above its drift or above
// the max ttl one matching ErrInvalidTTL; those, an invalid CallOption (and
// WaitAtMost above 0 or WithCallRetry, which only a waiting call uses), a
// closed Client (ErrClosed), and a ctx that has already ended (a
// *NotObtainedError with ReasonCancelled that wraps ctx's error) return at
// once and touch no node.
// TryLock never joins the key's line on the nodes: a release keeps the
// key for the first Lock call in line for a short while (or hands it to
// that call, see WithKeyHandOff), and TryLock is refused with ReasonHeld
// meanwhile. A caller that polls with TryLock therefore yields
// to Lock callers and, under steady contention from them, can keep
// losing; use Lock to wait in line. Safe for concurrent use.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...CallOption) (l *Lease, err error) {
	ctx, acq := c.startAcquisition(ctx, "quorumlock.TryLock", key, ttl)
	defer func() { acq.end(l, err) }()
	cc, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cc.onlyOnce("TryLock"); err != nil {
		return nil, err
	}
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, c.endedBefore(ctx, key)
	}
	return c.tryLock(ctx, key, ttl, &cc)
}

// tryLock is TryLock once its input is checked.
func (c *Client) tryLock(ctx context.Context, key string, ttl time.Duration, cc *callConfig) (*Lease, error) {
	at := c.tryAdmitting(ctx, key, ttl, "", 0, c.callArgs(cc))
	return at.lease, at.err
}

// Lock locks key for ttl, waiting while someone else holds it: it retries
// after each failed attempt, woken early when the holder releases or its
// key is about to expire, until it obtains the lease, ctx ends (the error
// then wraps both ErrNotObtained and ctx.Err()), the Client is closed
// (ErrClosed), or the WithRetry policy gives up (the last attempt's
// error), or the WaitAtMost bound passes (the last attempt's error, see
// WaitAtMost; WaitAtMost(0) makes one attempt, as TryLock does). The
// call's options (CallOption) apply to this call alone: WithCallRetry
// replaces the Client's retry policy, WithMetadata stores who holds the
// lock. Lock calls of one Client on one key queue in memory and only the
// first in line sends attempts; with a WithRetry limit, an attempt that
// finds another Lock of this Client ahead in line counts as a failed
// attempt (ReasonLocal), as a lost race with another process would. Input
// errors and *ConfigError are those of TryLock and end the wait at once.
// Nodes that serve their restart quarantine (a new deployment, or nodes
// that lost their data) make Lock wait until it ends; the first refused
// attempt of the episode logs one Warn line with the time left and calls
// the WithQuarantineNotice function, so the wait is not silent. While
// attempts fail because the lock service cannot grant the key
// (IsUnavailable), Lock backs off, whatever its retry policy: from the
// second such attempt in a row it waits at least 50 to 100 ms (random),
// doubled per attempt up to 0.5 to 1 s, but never past the moment the
// nodes said a quarantine ends, so that waiting clients do not keep nodes
// that are too busy to answer busier.
//
// Waiting Lock calls form a line per key on each node, in the order they
// began; a call keeps its place for as long as it goes on trying, however
// long it waits. A release keeps the free key for the first in line for a
// few round trips and wakes it, and the call takes the key with an attempt
// of its own. With WithKeyHandOff (and without fencing: neither WithFencing
// nor Fenced), a release hands the
// key itself to the first in line instead: it sets the key to that call's
// id, with the call's ttl, and tells its Client; the call holds the lock
// once a majority of nodes did so, without a round of its own, and its
// lease counts from before its first attempt. Safe for concurrent use.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...CallOption) (l *Lease, err error) {
	ctx, acq := c.startAcquisition(ctx, "quorumlock.Lock", key, ttl)
	defer func() { acq.end(l, err) }()
	cc, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, c.endedBefore(ctx, key)
	}
	switch {
	case cc.tryOnce():
		return c.tryLock(ctx, key, ttl, &cc)
	case cc.waitSet:
		// The bound ends the waits between attempts, not an attempt
		// under way: one cut short would report the cut, not why the
		// lock was not free, and its cleanup would cost a round.
		wctx, cancel := context.WithTimeoutCause(ctx, cc.wait, waitBound(cc.wait))
		defer cancel()
		return c.lock(ctx, wctx, key, ttl, &cc)
	}
	return c.lock(ctx, ctx, key, ttl, &cc)
}

// onlyQuarantine reports whether err is an attempt's failure for want of
// admitted nodes (ReasonQuarantine) in which every node that did not grant
// and was heard from is in quarantine or a hold-off. The nodes not heard
// from could not have made a majority with the grants (the round was
// decided without them), and one not waited for (it missed its last
// deadline) is named with an error of its own.
func onlyQuarantine(err error) bool {
	var e *NotObtainedError
	if !errors.As(err, &e) || e.Reason != ReasonQuarantine {
		return false
	}
	for _, ne := range e.NodeErrors() {
		if !errors.Is(ne.Err, ErrNodeQuarantined) {
			return false
		}
	}
	return true
}

// waitBound is the cause of a Lock's acquisition ctx when its WaitAtMost
// bound passed.
type waitBound time.Duration

func (d waitBound) Error() string {
	return fmt.Sprintf("waited %v (WaitAtMost)", time.Duration(d))
}

// lock is Lock's wait once its input is checked. Its attempts run under
// ctx, the caller's; its waits between them end with wctx too, which is
// ctx bounded by WaitAtMost, and no attempt starts once wctx ended.
func (c *Client) lock(ctx, wctx context.Context, key string, ttl time.Duration, cc *callConfig) (*Lease, error) {
	w := c.newWaiter(key, ttl, cc)
	defer w.close()
	limited := cc.maxAttempts > 0
	for n := 0; ; n++ {
		if w.pass == nil {
			limit := waitForever
			if limited {
				limit = 0
			}
			if err := w.enter(wctx, limit); err != nil {
				return nil, w.stopped(wctx, err)
			}
		}
		if w.pass != nil {
			if n > 0 && wctx.Err() != nil {
				return nil, w.stopped(wctx, wctx.Err())
			}
			if l, err := w.attempt(ctx, n); l != nil || err != nil {
				return l, err
			}
		} else {
			w.last = outcome{err: &NotObtainedError{Key: key, Reason: ReasonLocal, Needed: c.quorum, Nodes: len(c.nodes),
				Detail: "another Lock call of this Client is ahead in line for the key"}}
		}
		if limited && n+1 >= cc.maxAttempts {
			return nil, w.last.err
		}
		if c.isClosed() {
			return nil, w.stopped(wctx, ErrClosed)
		}
		delay := w.nextDelay(cc.retry(n))
		if w.pass == nil {
			// In line behind another Lock of this Client: wait for the
			// gate, at most as long as the retry policy would sleep.
			if err := w.enter(wctx, delay); err != nil {
				return nil, w.stopped(wctx, err)
			}
			continue
		}
		if !w.listen(wctx) {
			continue // not heard from before the attempt: try again at once
		}
		if err := w.sleep(wctx, delay); err != nil {
			return nil, w.stopped(wctx, err)
		}
		if l := w.handedOff(false); l != nil {
			return w.won(l)
		}
	}
}

// endedBefore is the error of a Lock, TryLock or Do whose ctx had ended
// before the call: it sends nothing (an attempt's calls are detached from
// ctx, so that a lock that is won reaches every node, and would otherwise
// go out, fail, and be cleaned up, for nothing).
func (c *Client) endedBefore(ctx context.Context, key string) error {
	return &NotObtainedError{Key: key, Reason: ReasonCancelled, Needed: c.quorum, Nodes: len(c.nodes),
		Detail: "ctx ended before the first attempt; no node was contacted", Errs: []error{ctx.Err()}}
}

// stopped is Lock's error when it stops waiting because of why (ctx's
// error or ErrClosed), keeping the last attempt's error.
func (c *Client) stopped(key string, last, why error) error {
	var bound waitBound
	if errors.As(why, &bound) {
		// The call's own WaitAtMost, not its caller, ended the wait: the
		// last attempt's error says why the lock was not obtained.
		var e *NotObtainedError
		if errors.As(last, &e) {
			e.Detail = bound.Error() + ": " + e.Detail
			return e
		}
		return &NotObtainedError{Key: key, Reason: ReasonLocal, Needed: c.quorum, Nodes: len(c.nodes),
			Detail: bound.Error() + " behind another Lock call of this Client for the key"}
	}
	if errors.Is(why, ErrClosed) {
		if last == nil {
			return ErrClosed
		}
		return errors.Join(ErrClosed, last)
	}
	var e *NotObtainedError
	if errors.As(last, &e) {
		if !errors.Is(e, why) {
			e.Errs = append([]error{why}, e.Errs...)
		}
		e.Reason, e.Detail = ReasonCancelled, "gave up waiting: "+e.Detail
		return e
	}
	return &NotObtainedError{Key: key, Reason: ReasonCancelled, Needed: c.quorum, Nodes: len(c.nodes),
		Detail: "gave up waiting before any attempt", Errs: []error{why}}
}
