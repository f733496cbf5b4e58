package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Lease is a held lock. Its holder may act as the owner of Key until
// Deadline; after that, or once Done is closed, it must stop. The methods
// are safe for concurrent use.
type Lease struct {
	c     *Client
	key   string
	value string
	token uint64
	meta  string // WithMetadata's, stored with the key on the nodes
	// rel is the release of our value (with its tombstone ttl: the
	// acquisition's); prepared is its call, sharing the attempt's boxed
	// arguments, until the renewer keeps the lease (see keepLong): a
	// lease held briefly releases with no allocation for the call, and
	// one held long keeps the arguments alone.
	rel      script.ReleaseArgs
	prepared *script.Release
	// missed has bit i set where node i did not renew the lease in its
	// last extend round whose calls are over (none before the first): the
	// next round may re-create the key there (extendCalls, noteMissed).
	missed atomic.Uint64

	mu       sync.Mutex
	ttl      time.Duration // the longest ttl the lease was granted or extended with
	deadline time.Time
	// expiresBy is when the key has expired on every node, on our clock:
	// every call that set or renewed its expiry started before a round's
	// start plus that round's call bound, and node clocks run slow by at
	// most the drift. Release reports it.
	expiresBy time.Time
	timer     Timer
	state     leaseState
	done      chan struct{}
	pass      func() // passes this Client's gate for the key on; nil for TryLock
	lostBy    error  // why an extend found it lost
	onLoss    func() // run once the lease is lost or expires: see setOnLoss
	// With WithKeyHandOff: the Lock call's waiter id and its last failed
	// attempt's cleanup (see leaveAfter).
	waiter  string
	cleanup <-chan struct{}
	// obtained is when the lease was handed out, for the held-duration
	// metric and the release log.
	obtained time.Time
}

// leaveAfter records the Lock call's waiter id and its last failed
// attempt's cleanup (nil: none), for Release.
func (l *Lease) leaveAfter(waiter string, cleanup <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiter, l.cleanup = waiter, cleanup
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

type leaseState int

const (
	live leaseState = iota
	released
	lost
)

// newLease turns a won attempt into a lease, valid until ttl - drift after
// the attempt started. It returns nil once Close has begun: a lease must
// not be created that the Client's background work no longer looks after.
func (c *Client) newLease(a *attempt) *Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	// The holder leaves the key's line on every node when it releases
	// (granting nodes already dropped it): no place to go back to.
	l := &Lease{c: c, key: a.key, value: a.value, token: a.token, meta: a.meta, rel: a.releaseArgs(false).Standalone(), prepared: a.release(false), ttl: a.ttl,
		deadline: a.t0.Add(a.ttl - drift.Drift(a.ttl, c.cfg.factor)), done: make(chan struct{}), obtained: c.cfg.clock.Now()}
	l.expiresBy = l.keyExpiry(a.t0, c.nodeTimeout(a.ttl), a.ttl)
	c.held.Add(1)
	l.mu.Lock()
	l.armLocked()
	l.mu.Unlock()
	return l
}

// keyExpiry is when a key that calls sent from t0 on, each bounded by
// wire, set to expire after ttl has expired on every node, on our clock.
func (l *Lease) keyExpiry(t0 time.Time, wire, ttl time.Duration) time.Time {
	return t0.Add(wire + ttl + drift.Drift(ttl, l.c.cfg.factor))
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
	l.ended(s) // before Done closes, so that whoever waits on Done sees it counted
	close(l.done)
	if s == lost && l.onLoss != nil {
		go l.onLoss()
		l.onLoss = nil
	}
	if s != released {
		l.passGateLocked() // Release passes it once its deletes landed
	}
}

// Key returns the locked key, exactly as passed to Lock.
func (l *Lease) Key() string { return l.key }

// Metadata returns the metadata the lease was obtained with (WithMetadata),
// "" for none. The nodes keep it with the key for as long as the lease
// lives (Client.Inspect shows it).
func (l *Lease) Metadata() string { return l.meta }

// Value returns the value the lease holds the key with on the nodes: the
// random value of its acquisition, or, for a lease handed over by a
// release (WithKeyHandOff), its Lock call's id. Client.Inspect reports the
// same string as KeyState.Holder, so a holder can log it to be found. It
// is not a secret that guards anything: every compare-and-act of the lease
// happens inside this Client.
func (l *Lease) Value() string { return l.value }

// FencingToken returns the lease's fencing token: a number that is larger
// for every later holder of the same key, for a resource to refuse stale
// holders with (see package fencing). It is 0 unless the client was built
// WithFencing or the call asked for it (Fenced). Tokens grow across every
// fenced holder of the key, whatever unfenced holders came in between. It
// fits a PostgreSQL bigint.
func (l *Lease) FencingToken() uint64 { return l.token }

// Deadline returns the end of the lease's validity on this process's clock.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// KeepRenewed renews the lease in the Client's renewal batches, as Do
// renews its leases (every ttl/3, the leases due at once at most 256 to a
// call per node, a transient failure retried after ttl/10), until it is
// released, lost or past its validity, or WithMaxHold passes: a program
// that holds many leases keeps them with no goroutine per lease. Each
// renewal extends it by the longest ttl it was obtained or extended with.
// Done closes when the lease ends; the renewal's failures are logged as
// Warn, and a Release after the end returns ErrNotHeld. Close stops the
// renewals, as it stops Do's. Calling it again, or on a lease that has
// ended, does nothing. Safe for concurrent use.
func (l *Lease) KeepRenewed() {
	l.mu.Lock()
	ttl, live := l.ttl, l.state == live
	l.mu.Unlock()
	if !live || l.c.isClosed() {
		return
	}
	l.c.renew.keep(l, ttl, true)
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

// markLost ends the lease as lost; it reports whether it was live.
func (l *Lease) markLost() bool { return l.markLostBy(nil) }

// markLostBy ends the lease as lost because of why (kept for Do's error,
// set before Done closes); it reports whether it was live.
func (l *Lease) markLostBy(why error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.state == live
	if was && why != nil {
		l.lostBy = why
	}
	l.endLocked(lost)
	return was
}

// keepLong drops the lease's prepared release call: the renewer keeps
// the lease, so it is likely held long, and its Release can afford to
// prepare the call when it is made.
func (l *Lease) keepLong() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prepared = nil
}

// setOnLoss makes f run, on a goroutine of its own, once the lease is
// lost or its validity ends (not when it is released); nil unsets it. It
// reports whether the lease had already ended that way: a new f then runs
// at once, and one set before has run or is running. Do watches its lease
// with it instead of a goroutine per lease waiting on Done.
func (l *Lease) setOnLoss(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == lost {
		if f != nil {
			go f()
		}
		return true
	}
	l.onLoss = f
	return false
}

// lostCause is what ended the lease when an extend found it lost.
func (l *Lease) lostCause() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostBy
}

// Release gives the lock up: a compare-and-delete on every node, so it can
// never delete another holder's key; where the key is not (yet) ours it
// leaves a tombstone, so an acquire of ours still on its way cannot take
// the key afterwards. Done is closed at once. It returns nil once a
// majority confirmed the delete, without waiting for the other nodes
// (their calls go on in the background, bounded by the cleanup timeout and
// detached from ctx). Replies that come after the node timeout still
// count: Release judges only when a majority confirmed, when that became
// impossible, when every node answered, or at the cleanup timeout (a node
// that missed its last deadline or could not be reached gets the node
// timeout, at least 100 ms), whichever is first, and never after ctx
// ends. It returns ErrNotHeld when the lease had already ended (a second
// Release, or the key expired or was taken over on a majority), and a
// *ReleaseError (ErrReleaseUnconfirmed) when fewer than a majority
// confirmed and the key may outlive the call on the others, to expire
// with its ttl; a key that has expired on every node by then is released
// and Release returns nil. It works after Client.Close too (then it waits
// for every node, up to the cleanup timeout). A ctx that has already
// ended sends nothing: Release then returns an error wrapping ctx's error
// (and ErrNotHeld if the lease had already ended), and the lease is
// unchanged (a live one is still held until its deadline, Done open), to
// be released with a live ctx. Safe for concurrent use.
func (l *Lease) Release(ctx context.Context) (err error) {
	c := l.c
	ctx, span := c.startSpan(ctx, "quorumlock.Release", l.key, 0)
	defer func() { l.released(span, err) }()
	l.mu.Lock()
	prev := l.state
	expired := !c.cfg.clock.Now().Before(l.deadline)
	if err := ctx.Err(); err != nil && prev != released {
		// Nothing is sent and the lease stays as it was, so that a
		// Release with a live ctx can still give the lock back.
		l.mu.Unlock()
		if prev == lost || expired {
			return fmt.Errorf("%w: %s had expired or was lost before Release (nothing sent: %w)", ErrNotHeld, keyText(l.key), err)
		}
		return fmt.Errorf("redlock: release of %s not sent, the lease is unchanged (release it with a live ctx, such as context.WithoutCancel(ctx)): %w", keyText(l.key), err)
	}
	l.endLocked(released)
	ttl, freeBy, rel := l.ttl, l.expiresBy, l.prepared
	waiter, cleanup := l.waiter, l.cleanup
	l.mu.Unlock()
	if prev == released {
		return fmt.Errorf("%w: %s already released", ErrNotHeld, keyText(l.key))
	}

	if rel == nil {
		rel = c.boxes.Release(l.rel)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	round := quorum.StartOwned(c.pool, dctx, cancel, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		// A node that seems down gets the down wait (see releaseOn).
		return c.releaseOn(ctx, i, rel, ttl)
	})
	// Replies that come after the node timeout count: a release is not a
	// race against validity, and a late "deleted" on a busy host is as
	// good as an early one. The wait has its own bound, a little past the
	// calls' own: a call's ctx does not interrupt a read from a frozen
	// node at go-redis's defaults, and a call that does end at its
	// deadline reports in first.
	end, _ := dctx.Deadline()
	wctx, wcancel := context.WithDeadline(ctx, end.Add(downWaitMin))
	replies := round.Await(wctx, c.quorum, func(r quorum.Reply[bool]) bool { return r.Err == nil && r.Val })
	wcancel()
	// Wake this client's waiters only now that the deletes have landed:
	// woken earlier, they would find the key still held and go back to
	// sleep until its expiry.
	l.mu.Lock()
	l.passGateLocked()
	l.mu.Unlock()
	c.wake.local(l.key)
	if cleanup != nil {
		select {
		case <-cleanup:
		default:
			// The Lock call's last failed attempt is still being cleaned
			// up, and that cleanup puts the call back in its place in
			// line where it lands: leave the line again once it is over,
			// or a later release would hand the key to an id nobody
			// takes (and the key would wait out its ttl).
			c.leaveLine(l.key, waiter, ttl, cleanup)
		}
	}
	c.spawn(func() {
		defer cancel()
		round.Wait()
	})

	yes, gone, errs := c.tally(replies)
	switch {
	case prev == lost || expired:
		return fmt.Errorf("%w: %s had expired or was lost before Release", ErrNotHeld, keyText(l.key))
	case yes >= c.quorum:
		return nil
	case len(c.nodes)-gone < c.quorum:
		return fmt.Errorf("%w: %s no longer held our value on %d of %d nodes", ErrNotHeld, keyText(l.key), gone, len(c.nodes))
	}
	// A key that has expired everywhere by now does not outlive the call:
	// the lock is as free as a confirmed delete would have left it.
	if gone == 0 && !c.cfg.clock.Now().Before(freeBy) {
		return nil
	}
	if ctx.Err() != nil {
		errs = append([]error{ctx.Err()}, errs...)
	}
	return &ReleaseError{Key: l.key, Confirmed: yes, Gone: gone, Unanswered: len(c.nodes) - len(replies), Needed: c.quorum,
		Nodes: len(c.nodes), FreeBy: freeBy, Errs: errs}
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
