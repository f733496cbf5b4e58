package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// TryLock makes one attempt to lock key for ttl: one parallel round to
// every node (two with fencing), returning as soon as a majority granted
// or that became impossible, without waiting for slow nodes. On failure it
// returns an error wrapping ErrNotObtained, with a *NodeError per node that
// did not grant, and releases whatever it took on every node. An empty key,
// a ttl not above its drift or above the max ttl, or a closed Client is an
// error that touches no node. Safe for concurrent use.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	at := c.tryAdmitting(ctx, key, ttl, false)
	return at.lease, at.err
}

// tryAdmitting is one attempt, plus one more right away when nodes that
// refused to vote because they were not yet admitted (a new deployment)
// could be admitted at once.
func (c *Client) tryAdmitting(ctx context.Context, key string, ttl time.Duration, ordered bool) attempt {
	at := c.try(ctx, key, ttl, ordered)
	if at.err == nil || len(at.unadmitted) == 0 || ctx.Err() != nil {
		return at
	}
	// The round stopped at its decision, so more nodes than those that
	// answered may be unadmitted: check every node not yet seen admitted.
	actx, cancel := context.WithTimeout(ctx, 4*c.nodeTimeout(ttl))
	admitted := c.admit.admitNow(actx, c.admit.unseen())
	cancel()
	if !admitted {
		return at
	}
	return c.try(ctx, key, ttl, false)
}

// Lock locks key for ttl, waiting while someone else holds it: it retries
// after each failed attempt, woken early when the holder releases or its
// key is about to expire, until it obtains the lease, ctx ends (the error
// then wraps both ErrNotObtained and ctx.Err()), or the WithRetry policy
// gives up (the last attempt's error). Input errors are those of TryLock.
// Safe for concurrent use.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	start := c.cfg.clock.Now()
	pass, err := c.gates.enter(ctx, key)
	if err != nil {
		return nil, errors.Join(ErrNotObtained, err)
	}
	handed := false
	defer func() {
		if !handed {
			pass()
		}
	}()
	var wake chan struct{}
	for n := 0; ; n++ {
		// The first attempt is one parallel round unless this client saw
		// contention on the key lately; retries, which mean contention, go
		// through the key's gatekeeper node first. A holder that locks
		// again right after releasing then queues on the gatekeeper with
		// the waiters instead of beating them with a parallel round.
		ordered := n > 0 || c.contendedLately(key)
		if n > 0 {
			c.sawContention(key)
		}
		at := c.tryAdmitting(ctx, key, ttl, ordered)
		if at.err == nil {
			at.lease.holdGate(pass)
			handed = true
			c.inst.waitTime.Record(context.Background(), c.cfg.clock.Now().Sub(start).Seconds())
			return at.lease, nil
		}
		if ctx.Err() != nil {
			if errors.Is(at.err, ctx.Err()) {
				return nil, at.err
			}
			return nil, errors.Join(at.err, ctx.Err())
		}
		if c.cfg.maxAttempts > 0 && n+1 >= c.cfg.maxAttempts {
			return nil, at.err
		}
		if c.isClosed() {
			return nil, errors.Join(at.err, ErrClosed)
		}
		if wake == nil {
			// Subscribe, then try again at once: a release between the
			// failed attempt and the subscription would go unnoticed.
			ch, unregister := c.wake.register(key)
			defer unregister()
			wake = ch
			continue
		}
		delay := c.cfg.retry(n)
		if at.wait > 0 && at.wait < delay {
			delay = at.wait
		}
		t := time.NewTimer(delay)
		select {
		case <-wake:
			// Every waiter hears the same release. Trying all at once
			// splits the nodes between them and nobody wins a majority
			// (the more likely the fewer nodes are up), so spread the
			// attempts over about one round trip: the first one usually
			// takes every node.
			if at.took > 0 {
				j := time.NewTimer(rand.N(at.took))
				select {
				case <-j.C:
				case <-ctx.Done():
					j.Stop()
				}
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return nil, errors.Join(at.err, ctx.Err())
		}
	}
}

// contentionMemory is how long a key counts as contended after this
// client last had to retry a Lock on it.
const contentionMemory = time.Second

func (c *Client) sawContention(key string) {
	c.contended.Store(key, c.cfg.clock.Now())
}

func (c *Client) contendedLately(key string) bool {
	v, ok := c.contended.Load(key)
	if !ok {
		return false
	}
	if c.cfg.clock.Now().Sub(v.(time.Time)) < contentionMemory {
		return true
	}
	c.contended.CompareAndDelete(key, v)
	return false
}
