package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
)

// The lease's two calls to the nodes, Extend and Release. Its state is
// lease.go; the extend round that Extend shares with the renewer is
// extend.go.

// Extend renews the lease for ttl, measured from the start of the extend
// round, on every node that still holds its value, and succeeds only if a
// majority did within the new validity. It never re-creates a key that
// expired or was taken over; it sets the key again only on a node that
// did not renew it last round (one that lost it in a restart) and is
// admitted with this Client's settings, and counts the round only if it
// was decided before the deadline (docs/protocol.md, "Extends re-create
// what a restart lost"). It never shortens a key: a node keeps the
// later of its current expiry and ttl from now, and Deadline becomes the
// later of the current deadline and the one this round earned, so
// concurrent Extends (Do's renewal and one from fn) cannot leave the lease
// promising more than the nodes hold. It returns ErrNotHeld (and closes
// Done) when the lease is over or a majority no longer holds it; any other
// error (nodes unreachable) leaves the lease valid until its old deadline.
// The ttl rules of Lock apply; an invalid ttl (an *InputError) touches no
// node, and so does a ctx that has already ended: Extend then returns an
// error wrapping ctx's error and leaves the lease as it was. Safe for
// concurrent use.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (err error) {
	c := l.c
	ctx, span := c.startSpan(ctx, "quorumlock.Extend", l.key, ttl)
	defer func() { extendEnded(span, err) }()
	if err := c.checkTTL(ttl); err != nil {
		return err
	}
	if l.over() {
		l.markLost()
		return fmt.Errorf("%w: %s expired or was released before Extend", ErrNotHeld, keyText(l.key))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redlock: extend of %s not sent, the lease is unchanged: %w", keyText(l.key), err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(ttl))
	defer cancel()
	r := c.extendRound(wctx, []*Lease{l}, []time.Duration{ttl}, c.nodeTimeout(ttl))
	err = l.applyExtend(r, ttl, r.leases[0])
	if err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return err
}

// applyExtend turns one lease's part of extend round r into the lease's
// new deadline, or an error: ErrNotHeld (closing Done) when a majority no
// longer holds it, another error when too few nodes answered (the lease
// stays valid until its old deadline).
func (l *Lease) applyExtend(r extendResult, ttl time.Duration, e extended) error {
	c := l.c
	t0, elapsed := r.t0, r.elapsed
	// Whatever the outcome, the nodes that renewed keep the key longer.
	l.mu.Lock()
	if x := l.keyExpiry(t0, r.wire, ttl); x.After(l.expiresBy) {
		l.expiresBy = x
	}
	l.mu.Unlock()
	if e.yes >= c.quorum {
		c.inst.extend("ok", l.key)
		if drift.Validity(ttl, elapsed, c.cfg.factor) <= 0 {
			return fmt.Errorf("redlock: extend of %s took %v of a %v ttl", keyText(l.key), elapsed, ttl)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.state != live {
			return fmt.Errorf("%w: %s was released during Extend", ErrNotHeld, keyText(l.key))
		}
		// A round counts only if it was decided while the lease was
		// trusted: a key it re-created after the lease lapsed may stand
		// where another holder's was granted and released meanwhile, and
		// the lease must not be trusted again across that holder
		// (docs/protocol.md, "Extends re-create what a restart lost").
		if !t0.Add(elapsed).Before(l.deadline) {
			err := fmt.Errorf("%w: %s lapsed before its extend round was decided", ErrNotHeld, keyText(l.key))
			l.lostBy = err
			l.endLocked(lost)
			return err
		}
		l.ttl = max(l.ttl, ttl)
		if d := t0.Add(ttl - drift.Drift(ttl, c.cfg.factor)); d.After(l.deadline) {
			l.deadline = d
			l.armLocked()
		}
		return nil
	}
	if len(c.nodes)-e.gone < c.quorum {
		c.inst.extend("lost", l.key)
		err := fmt.Errorf("%w: %s no longer holds our value on %d of %d nodes", ErrNotHeld, keyText(l.key), e.gone, len(c.nodes))
		l.mu.Lock()
		if t0.Add(elapsed).Before(l.deadline) {
			// Decided within the validity, when every node still had our
			// key unless it lost it: the lease was lost, not left to expire.
			l.missing = true
		}
		l.mu.Unlock()
		l.markLostBy(err)
		return err
	}
	c.inst.extend("error", l.key)
	n := len(c.nodes)
	heard := ""
	if replied := e.yes + e.gone + len(e.errs); replied < n {
		// The round was decided before the other nodes answered.
		heard = fmt.Sprintf(" (decided when %d had answered)", replied)
	}
	return errors.Join(append([]error{fmt.Errorf("redlock: extend of %s reached %d of %d nodes%s, %d needed", keyText(l.key), e.yes, n, heard, c.quorum)}, e.errs...)...)
}

// Release gives the lock up: a compare-and-delete on every node, so it can
// never delete another holder's key; where the key is not (yet) ours it
// leaves a tombstone, so an acquire of ours still on its way cannot take
// the key afterwards. Done is closed at once. It returns nil once a
// majority confirmed the delete, without waiting for the other nodes
// (their calls go on in the background, bounded by the cleanup timeout and
// detached from ctx; a call still waiting for its turn to a busy or
// frozen node when that timeout ends is sent anyway, its reply unread, up
// to the moment the key would have expired there, so that giving up on
// the replies does not leave the key held for its ttl). Replies that come
// after the node timeout still count: Release judges only when a majority confirmed, when that became
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
	ttl, freeBy, rel, deadline := l.ttl, l.expiresBy, l.prepared, l.deadline
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
		ok, err := c.releaseOn(ctx, i, rel, ttl, freeBy)
		if err == nil && !ok && c.cfg.clock.Now().Before(deadline) {
			// "Not ours", from a node that ran the call before the
			// deadline, when our key could not have expired there yet.
			l.goneInTime.Add(1)
		}
		return ok, err
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
		if len(c.nodes)-int(l.goneInTime.Load()) < c.quorum {
			l.noteMissing()
			return fmt.Errorf("%w: %s no longer held our value on %d of %d nodes", ErrNotHeld, keyText(l.key), gone, len(c.nodes))
		}
		// Some of those replies came after the deadline, when the key may
		// have expired there: the lease ran out, it was not shown lost.
		return fmt.Errorf("%w: %s no longer held our value on %d of %d nodes, some of them answering after its validity had ended", ErrNotHeld, keyText(l.key), gone, len(c.nodes))
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

// released ends Release's span and logs the release at Debug level.
func (l *Lease) released(span trace.Span, err error) {
	held := l.c.cfg.clock.Now().Sub(l.obtained)
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(releaseOutcome(err)), attrHeld.Float64(ms(held)))
		if l.token != 0 {
			span.SetAttributes(attrToken.Int64(int64(l.token)))
		}
	}
	switch {
	case !l.c.debug(context.Background()):
	case err != nil:
		l.c.cfg.logger.Debug("redlock: lease released", "key", l.key, "held", held, "token", l.token, "err", err)
	default:
		l.c.cfg.logger.Debug("redlock: lease released", "key", l.key, "held", held, "token", l.token)
	}
	endSpan(span, err)
}
