package redlock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
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
	// missing: a round learned, from replies that came within the
	// lease's validity, that a majority no longer held our value (see
	// noteMissing); goneInTime counts a Release's such replies.
	missing    bool
	goneInTime atomic.Int32
	onLoss     func() // run once the lease is lost or expires: see setOnLoss
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

// ended records the end of a live lease (under l.mu): the leases-held
// gauge, the held duration, and a lost lease.
func (l *Lease) ended(s leaseState) {
	c := l.c
	c.held.Add(-1)
	outcome := "released"
	if s == lost {
		outcome = "lost"
		c.inst.leaseLost(l.key)
	}
	c.inst.held(outcome, l.key, c.cfg.clock.Now().Sub(l.obtained))
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

// noteMissing records that a majority was seen without our value while
// the lease was still valid: evidence that it was lost then, not merely
// left to expire.
func (l *Lease) noteMissing() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.missing = true
}

// heldToEnd reports whether the lease is still live and within its
// validity, and no round has found it missing: what Do asks the moment
// fn returns.
func (l *Lease) heldToEnd() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == live && l.c.cfg.clock.Now().Before(l.deadline) && !l.missing
}

// seenMissing reports whether a round found the lease missing (see
// noteMissing).
func (l *Lease) seenMissing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.missing
}

// lostCause is what ended the lease when an extend found it lost.
func (l *Lease) lostCause() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostBy
}
