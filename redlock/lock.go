package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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
// gives a *ConfigError (ErrConfigMismatch) instead. An empty key, a key in
// quorumlock's namespace ("quorumlock:..."), a ttl not above its drift or
// above the max ttl, or a closed Client is an error that touches no node.
// TryLock never joins the key's line on the nodes: for a short while after
// a release (the hand-off reservation, see Lock) the key is kept for the
// Lock calls the release named, and TryLock is refused with ReasonHeld
// (per node: "free, but other Lock calls are waiting in line first"). A
// caller that polls with TryLock therefore yields to Lock callers and,
// under steady contention from them, can keep losing; use Lock to wait in
// line. Safe for concurrent use.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	at := c.tryAdmitting(ctx, key, ttl, "", 0)
	return at.lease, at.err
}

// tryAdmitting is one attempt, plus one more right away when nodes that
// refused to vote because they were not admitted could be admitted at once
// (their quarantine was over).
func (c *Client) tryAdmitting(ctx context.Context, key string, ttl time.Duration, waiter string, place int64) outcome {
	at := c.try(ctx, key, ttl, waiter, place)
	if at.err == nil || len(at.unadmitted) == 0 || ctx.Err() != nil {
		return at
	}
	// The round stopped at its decision, so more nodes than those that
	// answered may be unadmitted: check every node not yet seen admitted.
	actx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
	admitted, left, mismatch := c.admit.admitNow(actx, c.admit.unseen())
	cancel()
	if mismatch != nil {
		return outcome{err: mismatch}
	}
	if !admitted {
		var e *NotObtainedError
		if left > 0 && errors.As(at.err, &e) && e.Reason == ReasonQuarantine {
			e.Wait = left
			e.Detail += fmt.Sprintf("; the next quarantine ends in %v", left.Round(time.Millisecond))
			at.wait = left
		}
		return at
	}
	return c.try(ctx, key, ttl, waiter, place)
}

// Lock locks key for ttl, waiting while someone else holds it: it retries
// after each failed attempt, woken early when the holder releases or its
// key is about to expire, until it obtains the lease, ctx ends (the error
// then wraps both ErrNotObtained and ctx.Err()), the Client is closed
// (ErrClosed), or the WithRetry policy gives up (the last attempt's
// error). Lock calls of one Client on one key queue in memory and only the
// first in line sends attempts; with a WithRetry limit, an attempt that
// finds another Lock of this Client ahead in line counts as a failed
// attempt (ReasonLocal), as a lost race with another process would. Input
// errors and *ConfigError are those of TryLock and end the wait at once.
// Safe for concurrent use.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	start := c.cfg.clock.Now()
	limited := c.cfg.maxAttempts > 0
	// This call's place in the key's line on the nodes: a release wakes
	// the first in line by name instead of every waiter at once. The
	// place is when the call began, the same on every node, so that every
	// node orders the line alike and names the same waiter. The id starts
	// with this Client's, so the notice comes on the Client's own channel.
	waiter, place := c.wake.id+"."+newValue(), time.Now().UnixMicro()
	var pass func() // this call's place at the head of the key's local line
	defer func() {
		if pass != nil {
			pass()
		}
	}()
	var wake chan int
	var last outcome
	var since time.Time // when the last attempt started
	inLine := false     // an attempt reached the nodes, so the call may be in line there
	defer func() {
		if inLine && last.err != nil {
			c.leaveLine(key, waiter, ttl)
		}
	}()
	for n := 0; ; n++ {
		if pass == nil {
			limit := waitForever
			if limited {
				limit = 0
			}
			p, err := c.gates.enter(ctx, key, c.closing, limit)
			if err != nil {
				return nil, c.stopped(key, last.err, err)
			}
			pass = p
		}
		if pass != nil {
			since = time.Now()
			if wake != nil {
				c.wake.attempting(wake)
			}
			last = c.tryAdmitting(ctx, key, ttl, waiter, place)
			inLine = true
			if last.err == nil {
				last.lease.holdGate(pass)
				pass = nil
				c.inst.waitTime.Record(context.Background(), c.cfg.clock.Now().Sub(start).Seconds())
				return last.lease, nil
			}
			if errors.Is(last.err, ErrConfigMismatch) || errors.Is(last.err, ErrClosed) {
				return nil, last.err
			}
			if ctx.Err() != nil {
				return nil, c.stopped(key, last.err, ctx.Err())
			}
		} else {
			last = outcome{err: &NotObtainedError{Key: key, Reason: ReasonLocal, Needed: c.quorum, Nodes: len(c.nodes),
				Detail: "another Lock call of this Client is ahead in line for the key"}}
		}
		if limited && n+1 >= c.cfg.maxAttempts {
			return nil, last.err
		}
		if c.isClosed() {
			return nil, c.stopped(key, last.err, ErrClosed)
		}
		delay := c.cfg.retry(n)
		if last.wait > 0 && last.wait < delay {
			delay = last.wait
		}
		if pass == nil {
			// In line behind another Lock of this Client: wait for the
			// gate, at most as long as the retry policy would sleep.
			p, err := c.gates.enter(ctx, key, c.closing, delay)
			if err != nil {
				return nil, c.stopped(key, last.err, err)
			}
			pass = p
			continue
		}
		if wake == nil {
			// Subscribe, then try again at once unless the key's
			// subscription was live before the failed attempt began: a
			// release in between would go unnoticed.
			ch, unregister, live := c.wake.register(key, waiter, since)
			defer unregister()
			wake = ch
			if !live {
				continue
			}
		}
		if err := c.sleep(ctx, delay, wake, last.took); err != nil {
			return nil, c.stopped(key, last.err, err)
		}
	}
}

// sleep waits before Lock's next attempt: delay, or until a release wakes
// it. A release names the first waiter in the key's line, which tries at
// once (a waiter named second, by an older client's release that names
// two, tries one to two round trips (took) later, in case the first is
// gone). A release that names nobody (no line, or a release by this
// Client) wakes every waiter, and trying all at once would split the nodes
// between them so that nobody wins a majority, so each waits a random part
// of one round trip first.
func (c *Client) sleep(ctx context.Context, delay time.Duration, wake <-chan int, took time.Duration) error {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case pos := <-wake:
		var jitter time.Duration
		switch {
		case took <= 0 || pos == wakeFirst:
		case pos == wakeSecond:
			jitter = took + rand.N(took) // the first has had its round trip
		default:
			jitter = rand.N(took)
		}
		if jitter > 0 {
			j := time.NewTimer(jitter)
			defer j.Stop()
			select {
			case <-j.C:
			case <-ctx.Done():
			case <-c.closing:
			}
		}
	case <-t.C:
	case <-ctx.Done():
	case <-c.closing:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c.isClosed() {
		return ErrClosed
	}
	return nil
}

// stopped is Lock's error when it stops waiting because of why (ctx's
// error or ErrClosed), keeping the last attempt's error.
func (c *Client) stopped(key string, last, why error) error {
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

// leaveLine takes a Lock call that gave up out of the key's line on every
// node, in the background, so that releases stop naming it before the
// nodes forget it by themselves (lineMs). It is the release script with a
// value nobody holds and no tombstone: it only leaves the line, and, if a
// release had named the call and the key is free there, passes the
// reservation to the next in line for as long as a release of a lease of
// ttl would reserve it.
func (c *Client) leaveLine(key, waiter string, ttl time.Duration) {
	if c.isClosed() {
		return
	}
	v := newValue()
	p := prepare(releaseScript, []any{key, tombKey(v), queueKey(key), namedKey(key)},
		v, releaseChannel(key), "0", waiter, c.handoffWindow(ttl).Milliseconds(), "", c.lineMs, wakePrefix)
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
		defer cancel()
		var wg sync.WaitGroup
		for i := range c.nodes {
			wg.Go(func() {
				if _, err := c.releaseOn(ctx, i, p); err != nil {
					c.cfg.logger.Debug("redlock: leaving a key's line failed", "key", key, "node", i, "err", err)
				}
			})
		}
		wg.Wait()
	})
}
