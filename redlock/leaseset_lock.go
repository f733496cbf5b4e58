package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Taking a LeaseSet: LockAll and TryLockAll, and the checks and the
// all-or-nothing walk over the keys they share with DoAll. The set itself
// is leaseset.go.

// LockAll locks every key of keys for ttl, all or nothing, waiting for
// each like Lock (its line, hand-off, fencing and options apply to each
// key; WaitAtMost bounds the whole call, WithCallRetry each key's wait).
// The keys are taken one at a time in byte order, whatever order they are
// listed in, so two callers that list the same keys in other orders cannot
// deadlock; while it waits for a later key, the keys already taken are kept
// renewed in the Client's renewal batches (as Lease.KeepRenewed does), and
// that renewal stops when LockAll returns: the set is then renewed only by
// its Extend. On any failure (ctx ends, the WaitAtMost bound passes, the
// retry policy gives up, an earlier key is lost while waiting, the Client
// is closed) it releases every key it took before returning (detached from
// ctx, with the Client's cleanup timeout; a key whose release a majority
// did not confirm expires with its ttl) and returns an error that names
// the key that failed and wraps that key's error, so errors.Is(err,
// ErrNotObtained) holds as for Lock; an earlier key lost while waiting
// gives an error wrapping both ErrNotObtained and ErrNotHeld. An empty
// list, an empty or reserved key, or a key listed twice is an *InputError
// matching ErrInvalidKey; that, an invalid ttl or option, and a closed
// Client touch no node. Safe for concurrent use.
func (c *Client) LockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...CallOption) (*LeaseSet, error) {
	ls, err := c.takeAll(ctx, "LockAll", keys, ttl, opts, false)
	if err != nil {
		return nil, err
	}
	c.keepWhileWaiting(ls, false)
	return c.completeSet(ctx, "LockAll", ls)
}

// TryLockAll makes one attempt per key, as TryLock does, in the keys'
// byte order, all or nothing: when a key is held by someone else (or its
// attempt fails otherwise) it releases the keys it took before it and
// returns an error that names that key and wraps its error (errors.Is
// ErrNotObtained, IsHeld). Input errors are those of LockAll; WaitAtMost
// above 0 and WithCallRetry are refused, as by TryLock, before any node is
// touched. Safe for concurrent use.
func (c *Client) TryLockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...CallOption) (*LeaseSet, error) {
	ls, err := c.takeAll(ctx, "TryLockAll", keys, ttl, opts, true)
	if err != nil {
		return nil, err
	}
	c.keepWhileWaiting(ls, false)
	return c.completeSet(ctx, "TryLockAll", ls)
}

// checkKeys validates a set's keys and ttl before any node is contacted,
// and returns the keys in the order they are taken: byte order.
func (c *Client) checkKeys(call string, keys []string, ttl time.Duration) ([]string, error) {
	if len(keys) == 0 {
		return nil, &InputError{Arg: "key", Reason: call + " got no keys"}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for i, k := range sorted {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		if i > 0 && k == sorted[i-1] {
			return nil, &InputError{Arg: "key", Key: k, Reason: fmt.Sprintf("%s got key %s twice", call, keyText(k))}
		}
	}
	if err := c.check(sorted[0], ttl); err != nil {
		return nil, err
	}
	return sorted, nil
}

// held is a lease LockAll has taken and keeps while it waits for the
// next keys: lost receives what ended it if it was lost meanwhile.
type held struct {
	l       *Lease
	lost    chan error
	watched bool // renewed and watched: every key but the last
}

// takeAll takes every key, in byte order, and returns the leases, renewed
// and watched for loss (keepWhileWaiting ends that), or releases what it
// took and returns the error of the key that failed.
func (c *Client) takeAll(ctx context.Context, call string, keys []string, ttl time.Duration, opts []CallOption, once bool) ([]*held, error) {
	sorted, err := c.checkKeys(call, keys, ttl)
	if err != nil {
		return nil, err
	}
	cc, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if once {
		if err := cc.onlyOnce(call); err != nil {
			return nil, err
		}
	}
	// Each Lock runs under lctx, which an earlier key's loss cancels.
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	taken := make([]*held, 0, len(sorted))
	for i, k := range sorted {
		var l *Lease
		if once {
			l, err = c.TryLock(lctx, k, ttl, opts...)
		} else {
			o := opts
			if cc.waitSet && cc.wait > 0 {
				// The bound is the whole call's: each key waits for what
				// is left of it (0 left: one attempt).
				o = append(opts[:len(opts):len(opts)], WaitAtMost(max(cc.wait-time.Since(start), 0)))
			}
			l, err = c.Lock(lctx, k, ttl, o...)
		}
		if l != nil {
			h := &held{l: l, lost: make(chan error, 1)}
			taken = append(taken, h)
			if i < len(sorted)-1 {
				h.watched = true
				c.renew.add(l, ttl)
				l.setOnLoss(func() {
					why := c.lostWaiting(l)
					cancel(why)
					h.lost <- why
				})
			}
		}
		if err == nil {
			err = lostWhileWaiting(taken, k)
		}
		if err != nil {
			return nil, c.abandon(ctx, call, taken, k, i, len(sorted), err)
		}
	}
	return taken, nil
}

// lostWhileWaiting is the error of an earlier lease lost while LockAll
// waited for key (nil if none was), once the call on key has returned.
func lostWhileWaiting(taken []*held, key string) error {
	for _, h := range taken {
		select {
		case why := <-h.lost:
			h.lost <- why // abandon reads it again
			return fmt.Errorf("%w: %s was lost while waiting for %s: %w", ErrNotObtained, keyText(h.l.key), keyText(key), why)
		default:
		}
	}
	return nil
}

// lostWaiting is the error of a lease LockAll took and lost while it
// waited for a later key: it wraps ErrNotHeld and what ended it (the
// renewal that found it lost, or its last failed round).
func (c *Client) lostWaiting(l *Lease) error {
	why := c.renew.why(l)
	if errors.Is(why, ErrNotHeld) {
		return fmt.Errorf("redlock: lease on %s ended: %w", keyText(l.key), why)
	}
	return fmt.Errorf("%w: lease on %s ended: %w", ErrNotHeld, keyText(l.key), why)
}

// keepWhileWaiting stops watching the leases for loss, and stops their
// renewal unless keep (DoAll, which hands them to its own renewal). It
// waits for any loss callback that has started.
func (c *Client) keepWhileWaiting(taken []*held, keep bool) {
	for _, h := range taken {
		if !h.watched {
			continue
		}
		if h.l.setOnLoss(nil) {
			why := <-h.lost
			h.lost <- why
		}
		if !keep {
			c.renew.remove(h.l)
		}
	}
}

// completeSet makes the set of the leases taken, once keepWhileWaiting
// ended their watch, unless one was lost after its key's wait: then it
// stops renewing them, releases them all and fails as takeAll does.
func (c *Client) completeSet(ctx context.Context, call string, taken []*held) (*LeaseSet, error) {
	ls := make([]*Lease, len(taken))
	for i, h := range taken {
		ls[i] = h.l
	}
	if err := lostWhileWaiting(taken, ls[len(ls)-1].key); err != nil {
		for _, l := range ls {
			c.renew.remove(l)
		}
		c.releaseAll(ctx, ls)
		return nil, fmt.Errorf("redlock: %s gave up after the last key, every key taken was released: %w", call, err)
	}
	return newLeaseSet(c, ls), nil
}

// abandon releases every lease taken (for a failure on key, number i of
// n), and returns the call's error.
func (c *Client) abandon(ctx context.Context, call string, taken []*held, key string, i, n int, err error) error {
	c.keepWhileWaiting(taken, false)
	ls := make([]*Lease, len(taken))
	for j, h := range taken {
		ls[j] = h.l
	}
	c.releaseAll(ctx, ls)
	if lost := lostWhileWaiting(taken, key); lost != nil {
		// An earlier key was lost, which cut key's wait short: that loss
		// is the failure.
		return fmt.Errorf("redlock: %s gave up at key %d of %d, every key taken was released: %w", call, i+1, n, lost)
	}
	if i == 0 {
		return fmt.Errorf("redlock: %s failed on %s, the first of %d keys, and holds none: %w", call, keyText(key), n, err)
	}
	return fmt.Errorf("redlock: %s failed on %s (key %d of %d), the %d taken before it were released: %w", call, keyText(key), i+1, n, i, err)
}

// releaseAll releases the leases concurrently, detached from ctx with the
// Client's cleanup timeout, as a failed attempt cleans up: a ctx that has
// ended must not leave keys held. A lease that had ended already is
// skipped; a release a majority did not confirm is logged (the key
// expires with its ttl).
func (c *Client) releaseAll(ctx context.Context, ls []*Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	defer cancel()
	for i, err := range eachLease(ls, func(l *Lease) error { return l.Release(rctx) }) {
		if err != nil && !errors.Is(err, ErrNotHeld) {
			c.cfg.logger.Warn("redlock: release of a key of a set not confirmed by a majority", "key", keyText(ls[i].key), errAttr(err))
		}
	}
}
