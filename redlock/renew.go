package redlock

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"
)

// renewer keeps every lease that Do holds on this Client renewed, in
// batches: each renewal round carries all the leases due by then in one
// script call per node, so a thousand leases cost the nodes a few round
// trips per renewal period, not a thousand. A lease is renewed every ttl/3
// and may be taken up to a quarter of that early to join a batch, so a
// node sees at most about four rounds per period whatever the number of
// leases. A renewal is never due later than half the lease's remaining
// validity, though (see nextRenewal): a lease handed over inside a release
// counts from before its call's first attempt and may come with much less
// than ttl/3 left. A transient failure (too few nodes answered) retries after
// ttl/10; a lease a majority no longer holds ends (ErrNotHeld, Done
// closes), exactly as with Lease.Extend, which each lease's outcome goes
// through.
//
// A node runs the extend script for a whole call at once, in time that
// grows with the leases the call carries, while each call is judged by the
// renewal bound of its shortest ttl (renewBound). So the leases due are
// sent in chunks of at most renewChunk, shortest ttl first, up to
// renewInFlight of them out at once: each chunk is a round of its own,
// counted from its own start, and a chunk a node was too slow for fails
// only its own leases. A lease in a round is not due again until the
// round is over; the leases that fall due meanwhile go in the next chunks
// without waiting for it.
//
// It is one goroutine per Client, started on first use and stopped by
// Close; after Close, Do's leases are no longer renewed and their fn's ctx
// ends with their validity.
type renewer struct {
	c       *Client
	mu      sync.Mutex
	kept    map[*Lease]*kept
	wake    chan struct{}
	out     chan struct{} // a slot per chunk in flight (renewInFlight)
	running bool
	chunk   int // the most leases one round carries: renewChunk but in tests
	// wakeAt is when the loop looks at the leases again at the latest:
	// the end of its sleep, or the zero time while it is in a pass (it
	// looks again as soon as the pass is out). A lease that falls due
	// before it wakes the loop (poke); one due later waits for that look.
	// Without it every lease taken and every round that came back woke
	// the loop for a pass over every lease: 100,000 leases taken one
	// after another were 100,000 passes over up to 100,000.
	wakeAt time.Time
	passes int64 // passes over the leases, for tests
}

// kept is a lease Do holds, as the renewer sees it.
type kept struct {
	ttl   time.Duration
	every time.Duration
	next  time.Time // when it is due
	start time.Time
	why   error // what ended it, for Do's error; guarded by renewer.mu
	off   bool  // no longer renewed: WithMaxHold reached, or the lease is over
	busy  bool  // in a round now (or queued for one): not due again until it is over
	// auto: kept by Lease.KeepRenewed, not by Do, so nobody removes it:
	// the renewer forgets it once it is over.
	auto bool
}

// renewChunk is the most leases one renewal call carries. The extend
// script's time grows linearly with its leases, while the call's node
// timeout is fixed by the shortest ttl (150 ms for 3 s); 10,000 leases are
// 40 calls per node per renewal period. Measured at 10,000 leases (see
// results/2026-12-06-renew-chunk-size.md): 64 costs the client more CPU,
// 1024 no less than 256 but holds a node's single thread for up to about
// 18 ms per call, where every other command to it waits; 256 holds it for
// about 7 ms.
const renewChunk = 256

func newRenewer(c *Client) *renewer {
	return &renewer{c: c, kept: map[*Lease]*kept{}, wake: make(chan struct{}, 1), out: make(chan struct{}, renewInFlight), chunk: renewChunk}
}

// minRenewGap is the least time between a lease's renewals that
// nextRenewal schedules: a lease with almost no validity left is renewed
// at once, not in a loop of ever shorter waits.
const minRenewGap = 5 * time.Millisecond

// nextRenewal is when a lease whose validity ends at deadline is next due:
// at, or half the validity left after now if that comes first (never less
// than minRenewGap away), so that a renewal, and a retry after it if it
// fails, come before the deadline. A lease whose validity is over keeps
// at: nothing can save it, and its end is Do's to handle.
func nextRenewal(now, deadline, at time.Time) time.Time {
	left := deadline.Sub(now)
	if left <= 0 {
		return at
	}
	if soon := now.Add(max(left/2, minRenewGap)); soon.Before(at) {
		return soon
	}
	return at
}

// add starts renewing l for ttl.
func (r *renewer) add(l *Lease, ttl time.Duration) { r.keep(l, ttl, false) }

// keep starts renewing l for ttl; auto says nobody will remove it (see
// kept.auto). It does nothing when l is renewed already.
func (r *renewer) keep(l *Lease, ttl time.Duration, auto bool) {
	now := r.c.cfg.clock.Now()
	next := nextRenewal(now, l.Deadline(), now.Add(ttl/3))
	k := &kept{ttl: ttl, every: ttl / 3, next: next, start: now, auto: auto}
	r.mu.Lock()
	if r.kept[l] != nil {
		r.mu.Unlock()
		return
	}
	r.kept[l] = k
	start := !r.running
	r.running = true
	wake := r.dueBeforeWakeLocked(k)
	r.mu.Unlock()
	l.keepLong()
	if start {
		r.c.spawn(r.run)
	}
	if wake {
		r.poke()
	}
}

// dueBeforeWakeLocked reports whether k falls due before the loop's next
// look, which takes every lease due by then: the loop must be woken for
// k. r.mu must be held.
func (r *renewer) dueBeforeWakeLocked(k *kept) bool {
	return !r.wakeAt.IsZero() && k.next.Before(r.wakeAt)
}

// remove stops renewing l and returns what ended it, if anything did.
func (r *renewer) remove(l *Lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.kept[l]
	delete(r.kept, l)
	if k == nil {
		return nil
	}
	return k.why
}

// why returns what ended l, for fn's ctx: the extend that found it lost,
// or what stopped its renewal (ErrMaxHold, the last failed round) before
// its validity ran out.
func (r *renewer) why(l *Lease) error {
	if err := l.lostCause(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.kept[l]; k != nil && k.why != nil {
		return k.why
	}
	return errors.New("validity ended")
}

func (r *renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// due returns the leases to renew now, and when to look again.
func (r *renewer) due(now time.Time) ([]*Lease, []time.Duration, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes++
	var ls []*Lease
	var ttls []time.Duration
	next := now.Add(time.Hour)
	defer func() {
		// Asleep until next, or looking again as soon as ls are out.
		r.wakeAt = time.Time{}
		if len(ls) == 0 {
			r.wakeAt = next
		}
	}()
	for l, k := range r.kept {
		if k.off || k.busy {
			continue
		}
		// A lease that is over (lost, released, or its validity ran out)
		// is never renewed again: no extend can make it valid, and while
		// its fn winds down each retry would cost every node a call, when
		// the nodes may be the reason it was lost.
		if l.over() {
			k.off = true
			if k.auto {
				delete(r.kept, l)
			}
			continue
		}
		if maxHold := r.c.cfg.maxHold; maxHold > 0 && now.Sub(k.start) >= maxHold {
			k.off, k.why = true, ErrMaxHold // Done closes at the deadline
			continue
		}
		if !k.next.After(now.Add(k.every / 4)) {
			k.busy = true
			ls = append(ls, l)
			ttls = append(ttls, k.ttl)
			continue
		}
		if k.next.Before(next) {
			next = k.next
		}
	}
	return ls, ttls, next
}

func (r *renewer) run() {
	c := r.c
	for {
		now := c.cfg.clock.Now()
		ls, ttls, next := r.due(now)
		if len(ls) == 0 {
			t := time.NewTimer(next.Sub(now))
			select {
			case <-t.C:
			case <-r.wake:
				t.Stop()
			case <-c.closing:
				t.Stop()
				return
			}
			continue
		}
		// Shortest ttl first, so that a chunk's node timeout (that of its
		// shortest ttl) is as long as its leases allow.
		order := make([]int, len(ls))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return ttls[order[a]] < ttls[order[b]] })
		for from := 0; from < len(order); from += r.chunk {
			idx := order[from:min(from+r.chunk, len(order))]
			chunk, chunkTTLs := make([]*Lease, len(idx)), make([]time.Duration, len(idx))
			for j, i := range idx {
				chunk[j], chunkTTLs[j] = ls[i], ttls[i]
			}
			// A Close already made wins over a free slot (select picks
			// either when both are ready). One made after this check is
			// no different from one made just after the round went out:
			// Close waits for the round, and sends no further one.
			select {
			case <-c.closing:
				r.idle(ls, order[from:])
				return
			default:
			}
			select {
			case r.out <- struct{}{}:
			case <-c.closing:
				r.idle(ls, order[from:])
				return
			}
			c.spawn(func() {
				defer func() { <-r.out }()
				r.renew(chunk, chunkTTLs)
			})
		}
		// The next pass does not wait for this one's chunks: a lease in a
		// round is busy until its round is over, and due skips it, so a
		// lease is never in two rounds at once, while a chunk that waits
		// for a slow majority holds up no lease of another chunk.
	}
}

// idle marks the leases ls[i], i in which, as in no round: they were due
// but never got one (Close).
func (r *renewer) idle(ls []*Lease, which []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range which {
		if k := r.kept[ls[i]]; k != nil {
			k.busy = false
		}
	}
}

// renewInFlight is the most chunks out at once. Sent one
// after another, a pass's time was the sum of its rounds, and on a busy
// host, where every round waits for three node processes and the client
// to be scheduled, the leases late in a pass of 10,000 were renewed after
// their validity. Out together, a node's batcher sends two directly and
// the rest in a pipeline, and the node runs them one after another: the
// last of 8 full chunks waits for the 7 before it, under 1 ms each on
// average in renew-many at 10,000 leases (0.17 s of node CPU per second
// over 5 nodes and about 40 calls each) and up to about 7 ms under load
// (results/2026-12-06-renew-chunk-size.md), inside the 500 ms renewal
// bound of a 3 s ttl.
const renewInFlight = 8

// renewBound bounds each call of a renewal round whose shortest ttl is
// ttl: a sixth of it (500 ms at 3 s), or the node timeout if that is
// longer. Nobody waits on a renewal, and a lease is renewed with two
// thirds of its validity left, so a round may take far longer than the
// node timeout of a call someone waits on (5% of the ttl, 150 ms at 3 s):
// bounded by that, on a host whose busy cores made every call late, each
// round gave up on calls the nodes still ran, the next one queued behind
// them, and the leases ran out (results/2026-12-07-renew-bound.md). A
// round still counts only if it is decided before the lease's deadline
// (applyExtend), however long it waits.
func (c *Client) renewBound(ttl time.Duration) time.Duration {
	return max(c.nodeTimeout(ttl), ttl/6)
}

// renew runs one renewal round for ls (ttls[i] is ls[i]'s) and schedules
// each lease's next renewal by its outcome.
func (r *renewer) renew(ls []*Lease, ttls []time.Duration) {
	c := r.c
	// Every call of the round ends by its bound, so the round is waited
	// for that long and no longer.
	bound := c.renewBound(slices.Min(ttls))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	res := c.extendRound(ctx, ls, ttls, bound)
	cancel()
	wake := false
	for i, l := range ls {
		err := l.applyExtend(res, ttls[i], res.leases[i])
		var deadline time.Time // a lease that ended keeps the old cadence
		if !l.over() {
			deadline = l.Deadline()
		}
		r.mu.Lock()
		if k := r.kept[l]; k != nil {
			k.busy = false
			now := c.cfg.clock.Now()
			if err != nil {
				k.why = err
				k.next = nextRenewal(now, deadline, now.Add(max(k.ttl/10, time.Millisecond)))
				c.cfg.logger.Warn("redlock: extend failed", "key", keyText(l.key), errAttr(err))
			} else {
				k.next = nextRenewal(now, deadline, res.t0.Add(k.every))
			}
			// The loop may sleep past this lease's next renewal (a retry
			// is due sooner than any lease it looked at).
			wake = wake || r.dueBeforeWakeLocked(k)
		}
		r.mu.Unlock()
	}
	if wake {
		r.poke()
	}
}
