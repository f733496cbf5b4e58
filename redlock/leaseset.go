package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// LeaseSet is one lease over several keys, obtained all or nothing by
// Client.LockAll, TryLockAll or DoAll: a *Lease per key, taken in the keys'
// byte order. Its holder may act as the owner of every key until Deadline,
// the earliest of its leases' deadlines; once Done is closed (any one lease
// ended), it must stop acting as the owner of any of them. Like a Lease it
// is not reentrant. The methods are safe for concurrent use.
// docs/protocol.md, "One lease over several keys", has the arguments.
type LeaseSet struct {
	c      *Client
	leases []*Lease      // sorted by key
	done   chan struct{} // closed once any lease ended (see watch)
	exited chan struct{} // closed when watch returns
	mu     sync.Mutex
	over   bool
	why    error       // what ended the set (see watch), once over
	onEnd  func(error) // DoAll's: run once the set is over
}

// newLeaseSet makes a set of ls (sorted by key) and starts its watch.
func newLeaseSet(c *Client, ls []*Lease) *LeaseSet {
	s := &LeaseSet{c: c, leases: ls, done: make(chan struct{}), exited: make(chan struct{})}
	go s.watch()
	return s
}

// watch closes Done as soon as any lease's Done closes: one goroutine per
// set, with no other way to end than a lease ending, and every lease ends
// by its deadline at the latest unless something keeps renewing it (DoAll,
// which releases them all before it returns). Release and Extend wait for
// it once a lease has ended, so it never outlives the calls that end the
// set.
//
// A goroutine per lease waiting on its Done was rejected: a set of many
// keys would cost as many goroutines for one fact, "the set is over".
func (s *LeaseSet) watch() {
	defer close(s.exited)
	cases := make([]reflect.SelectCase, len(s.leases))
	for i, l := range s.leases {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.Done())}
	}
	i, _, _ := reflect.Select(cases)
	s.end(s.endedBy(s.leases[i]))
}

// endedBy is what ended the set when l, one of its leases, ended.
func (s *LeaseSet) endedBy(l *Lease) error {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	if st == released {
		return fmt.Errorf("%w: the lease on %s was released, which ends its set", ErrNotHeld, keyText(l.key))
	}
	return s.c.lossError(l)
}

// end marks the set over because of why (the first cause wins), closes
// Done and runs DoAll's hook.
func (s *LeaseSet) end(why error) {
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return
	}
	s.over = true
	if s.why == nil {
		s.why = why
	}
	why = s.why
	f := s.onEnd
	s.onEnd = nil
	close(s.done)
	s.mu.Unlock()
	if f != nil {
		f(why)
	}
}

// setOnEnd makes f run once the set is over (nil unsets it) and reports
// whether it was over already, with what ended it: then f runs at once.
func (s *LeaseSet) setOnEnd(f func(error)) (bool, error) {
	s.mu.Lock()
	if s.over {
		why := s.why
		s.mu.Unlock()
		if f != nil {
			f(why)
		}
		return true, why
	}
	s.onEnd = f
	s.mu.Unlock()
	return false, nil
}

// isOver reports whether the set has ended.
func (s *LeaseSet) isOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.over
}

// settle waits for watch to return if any lease has ended (it then
// returns at once).
func (s *LeaseSet) settle() {
	for _, l := range s.leases {
		select {
		case <-l.Done():
			<-s.exited
			return
		default:
		}
	}
}

// Leases returns the set's leases, one per key, sorted by key (byte
// order), whatever order the keys were given in. Each has the FencingToken
// of its own key (0 unless fenced): a resource named by a key is fenced
// with that key's token. The slice is a copy.
func (s *LeaseSet) Leases() []*Lease { return slices.Clone(s.leases) }

// Deadline returns the end of the set's validity on this process's clock:
// the earliest Deadline of its leases, read now, so that it follows every
// Extend and renewal. Trusting any one lease's deadline (the last key's,
// taken last) would overstate the set: the earlier keys may end sooner.
func (s *LeaseSet) Deadline() time.Time {
	d := s.leases[0].Deadline()
	for _, l := range s.leases[1:] {
		if dl := l.Deadline(); dl.Before(d) {
			d = dl
		}
	}
	return d
}

// Done returns a channel that is closed as soon as any of the set's leases
// ends (its validity ends, it is found lost, or it is released) or an
// Extend of the set fails.
func (s *LeaseSet) Done() <-chan struct{} { return s.done }

// Extend extends every lease of the set for ttl (concurrently, each as
// Lease.Extend does), and succeeds only if every one of them did; Deadline
// is then the earliest of the new deadlines. If any extension fails, the
// set is over: Done closes, every lease of the set is released (with the
// Client's cleanup timeout, detached from ctx), and Extend returns an
// error wrapping ErrNotHeld that names the first key, in byte order, whose
// extension failed, and wraps each failure. An invalid ttl (an
// *InputError), a ctx that has already ended (an error wrapping ctx's
// error) and a set that is over already (ErrNotHeld) touch no node and
// leave the set as it was. Safe for concurrent use.
func (s *LeaseSet) Extend(ctx context.Context, ttl time.Duration) error {
	c := s.c
	if err := c.checkTTL(ttl); err != nil {
		return err
	}
	if s.isOver() {
		return fmt.Errorf("%w: the set of %s was over before Extend", ErrNotHeld, s.keysText())
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redlock: extend of the set of %s not sent, the set is unchanged: %w", s.keysText(), err)
	}
	errs := eachLease(s.leases, func(l *Lease) error { return l.Extend(ctx, ttl) })
	first := slices.IndexFunc(errs, func(err error) bool { return err != nil })
	if first < 0 {
		return nil
	}
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", keyText(s.leases[i].key), err))
		}
	}
	err := fmt.Errorf("%w: extend of the set of %s failed on %s, so every lease of the set was released: %w",
		ErrNotHeld, s.keysText(), keyText(s.leases[first].key), errors.Join(failed...))
	s.mu.Lock()
	if !s.over && s.why == nil {
		s.why = err // for DoAll's fn: the watch reports it, not the release below
	}
	s.mu.Unlock()
	c.releaseAll(ctx, s.leases)
	s.settle()
	return err
}

// Release releases every lease of the set, concurrently, each as
// Lease.Release does, and returns their errors joined (nil when each was
// confirmed): a second Release, or one after a lease ended, matches
// ErrNotHeld; a release a majority did not confirm matches
// ErrReleaseUnconfirmed (that key expires with its ttl). A ctx that has
// already ended sends nothing, as for Lease.Release. Done is closed once it
// returns, unless ctx had ended. Safe for concurrent use.
func (s *LeaseSet) Release(ctx context.Context) error {
	errs := eachLease(s.leases, func(l *Lease) error { return l.Release(ctx) })
	s.settle()
	return errors.Join(errs...)
}

// eachLease runs f on every lease at once and returns its errors, in the
// leases' order, once all have returned.
func eachLease(ls []*Lease, f func(*Lease) error) []error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { errs[i] = f(l) })
	}
	wg.Wait()
	return errs
}

// heldToEnd reports whether the set has not ended and every lease of it
// is live and valid (see Lease.heldToEnd): what DoAll asks the moment fn
// returns.
func (s *LeaseSet) heldToEnd() bool {
	s.mu.Lock()
	over := s.over
	s.mu.Unlock()
	if over {
		return false
	}
	for _, l := range s.leases {
		if !l.heldToEnd() {
			return false
		}
	}
	return true
}

// keysText names the set's keys for messages.
func (s *LeaseSet) keysText() string { return keysText(s.leases) }

func keysText(ls []*Lease) string {
	out := "{"
	for i, l := range ls {
		if i > 0 {
			out += ", "
		}
		out += keyText(l.key)
	}
	return out + "}"
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
