package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/quorum"
)

// Lease is a held lock. Its holder may act as the owner of Key until
// Deadline; after that, or once Done is closed, it must stop. The methods
// are safe for concurrent use.
type Lease struct {
	c     *Client
	key   string
	value string
	token uint64

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time
	timer    drift.Timer
	state    leaseState
	done     chan struct{}
	pass     func() // passes this Client's gate for the key on; nil for TryLock

	late    []int  // nodes whose grant arrived after the decision
	deleted []bool // per node: Release's delete removed our value
	relDone bool   // Release's round has finished everywhere
}

// holdGate makes the lease hold its key's local gate until it ends.
func (l *Lease) holdGate(pass func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != live {
		pass()
		return
	}
	l.pass = pass
}

func (l *Lease) passGateLocked() {
	if l.pass != nil {
		l.pass()
		l.pass = nil
	}
}

// straggler records that node i granted our value after the round was
// decided, and reports whether the caller must delete it there now: when
// the lease ended without Release, or Release's delete on that node had
// already run (and found nothing) before our SET landed.
func (l *Lease) straggler(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.state == live || (l.state == released && !l.relDone):
		l.late = append(l.late, i)
		return false
	case l.state == released:
		return !l.deleted[i]
	}
	return true
}

type leaseState int

const (
	live leaseState = iota
	released
	lost
)

func (c *Client) newLease(key, value string, ttl time.Duration, token uint64, deadline time.Time) *Lease {
	l := &Lease{c: c, key: key, value: value, token: token, ttl: ttl, deadline: deadline, done: make(chan struct{})}
	l.mu.Lock()
	l.armLocked()
	l.mu.Unlock()
	return l
}

// armLocked (re)starts the timer that closes Done at the deadline.
func (l *Lease) armLocked() {
	if l.timer != nil {
		l.timer.Stop()
	}
	d := l.deadline.Sub(l.c.cfg.clock.Now())
	deadline := l.deadline
	l.timer = l.c.cfg.clock.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		// An Extend may have moved the deadline after this timer fired.
		if l.state == live && !l.c.cfg.clock.Now().Before(l.deadline) && l.deadline.Equal(deadline) {
			l.endLocked(lost)
			l.c.inst.lost.Add(context.Background(), 1)
		}
	})
}

func (l *Lease) endLocked(s leaseState) {
	if l.state != live {
		return
	}
	l.state = s
	if l.timer != nil {
		l.timer.Stop()
	}
	close(l.done)
	if s != released {
		l.passGateLocked() // Release passes it once its deletes landed
	}
}

// Key returns the locked key, exactly as passed to Lock.
func (l *Lease) Key() string { return l.key }

// FencingToken returns the lease's fencing token: a number that is larger
// for every later holder of the same key, for a resource to refuse stale
// holders with (see package fencing). It is 0 unless the client was built
// WithFencing. It fits a PostgreSQL bigint.
func (l *Lease) FencingToken() uint64 { return l.token }

// Deadline returns the end of the lease's validity on this process's clock.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel that is closed when the validity ends, when an
// Extend finds the lease lost, or when it is released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// over reports whether the lease has ended, by release, loss or expiry.
func (l *Lease) over() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state != live || !l.c.cfg.clock.Now().Before(l.deadline)
}

// Extend renews the lease for ttl, measured from the start of the extend
// round, on every node that still holds its value, and succeeds only if a
// majority did within the new validity. It never re-creates a key that
// expired or was taken over. It returns ErrNotHeld (and closes Done) when
// the lease is over or a majority no longer holds it; any other error
// (nodes unreachable) leaves the lease valid until its old deadline. The ttl
// rules of Lock apply; an invalid ttl touches no node.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	c := l.c
	if err := c.check(l.key, ttl); err != nil {
		return err
	}
	if l.over() {
		l.markLost()
		return fmt.Errorf("%w: %q expired or was released before Extend", ErrNotHeld, l.key)
	}
	t0 := c.cfg.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(ttl))
	defer cancel()
	ttlMs := ttl.Milliseconds()
	round := quorum.Start(rctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		v, err := extendScript.Run(ctx, c.nodes[i].sc, []string{l.key}, l.value, ttlMs).Int64()
		return v == 1, err
	})
	ok := func(r quorum.Reply[bool]) bool { return r.Err == nil && r.Val }
	replies := round.Await(rctx, c.quorum, ok)
	c.spawn(func() { round.Wait() })
	elapsed := c.cfg.clock.Now().Sub(t0)

	yes, gone, errs := c.tally(replies)
	if yes >= c.quorum {
		c.inst.extend("ok")
		if drift.Validity(ttl, elapsed, c.cfg.factor) <= 0 {
			return errors.Join(fmt.Errorf("redlock: extend of %q took %v of a %v ttl", l.key, elapsed, ttl), ctx.Err())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.state != live {
			return fmt.Errorf("%w: %q was released during Extend", ErrNotHeld, l.key)
		}
		l.ttl = ttl
		l.deadline = t0.Add(ttl - drift.Drift(ttl, c.cfg.factor))
		l.armLocked()
		return nil
	}
	if len(c.nodes)-gone < c.quorum {
		c.inst.extend("lost")
		if l.markLost() {
			c.inst.lost.Add(context.Background(), 1)
		}
		return fmt.Errorf("%w: %q no longer holds our value on %d of %d nodes", ErrNotHeld, l.key, gone, len(c.nodes))
	}
	c.inst.extend("error")
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(append([]error{fmt.Errorf("redlock: extend of %q reached %d of %d nodes, %d needed", l.key, yes, len(c.nodes), c.quorum)}, errs...)...)
}

// markLost ends the lease as lost; it reports whether it was live.
func (l *Lease) markLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.state == live
	l.endLocked(lost)
	return was
}

// Release gives the lock up: a compare-and-delete on every node, so it can
// never delete another holder's key. Done is closed at once. It returns nil
// once a majority confirmed the delete; calls to slow nodes go on in the
// background, bounded by the cleanup timeout, detached from ctx. It returns
// ErrNotHeld when the lease had already ended (a second Release, or the
// key expired or was taken over on a majority), and the joined per-node
// errors when too few nodes answered in time.
func (l *Lease) Release(ctx context.Context) error {
	c := l.c
	l.mu.Lock()
	prev := l.state
	expired := !c.cfg.clock.Now().Before(l.deadline)
	l.endLocked(released)
	l.mu.Unlock()
	if prev == released {
		return fmt.Errorf("%w: %q already released", ErrNotHeld, l.key)
	}
	if c.isClosed() {
		l.mu.Lock()
		l.passGateLocked()
		l.mu.Unlock()
		return ErrClosed
	}

	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	deleted := make([]bool, len(c.nodes)) // each index written by its own goroutine
	ra := newRelArgs(l.key, l.value)
	round := quorum.Start(dctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		ok, err := c.releaseOn(ctx, i, ra)
		deleted[i] = ok && err == nil
		return ok, err
	})
	ok := func(r quorum.Reply[bool]) bool { return r.Err == nil && r.Val }
	wctx, wcancel := context.WithTimeout(ctx, c.nodeTimeout(l.ttl))
	replies := round.Await(wctx, c.quorum, ok)
	wcancel()
	// Wake this client's waiters only now that the deletes have landed:
	// woken earlier, they would find the key still held and go back to
	// sleep until its expiry.
	l.mu.Lock()
	l.passGateLocked()
	l.mu.Unlock()
	c.wake.local(l.key)
	c.spawn(func() {
		defer cancel()
		round.Wait()
		l.mu.Lock()
		l.deleted, l.relDone = deleted, true
		late := l.late
		l.mu.Unlock()
		for _, i := range late {
			if !deleted[i] {
				c.releaseOne(l.key, l.value, i, l.ttl)
			}
		}
	})

	yes, gone, errs := c.tally(replies)
	switch {
	case prev == lost || expired:
		return fmt.Errorf("%w: %q had expired or was lost before Release", ErrNotHeld, l.key)
	case yes >= c.quorum:
		return nil
	case len(c.nodes)-gone < c.quorum:
		return fmt.Errorf("%w: %q no longer held our value on %d of %d nodes", ErrNotHeld, l.key, gone, len(c.nodes))
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(append([]error{fmt.Errorf("redlock: release of %q confirmed by %d of %d nodes; the rest expire with the ttl", l.key, yes, len(c.nodes))}, errs...)...)
}

// tally counts a compare-and-act round's replies: yes where the node held
// our value and acted, gone where it no longer held it, and the per-node
// errors of the rest.
func (c *Client) tally(replies []quorum.Reply[bool]) (yes, gone int, errs []error) {
	for _, r := range replies {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, r.Err))
		case r.Val:
			yes++
		default:
			gone++
		}
	}
	return yes, gone, errs
}
