package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Extend renews the lease for ttl, measured from the start of the extend
// round, on every node that still holds its value, and succeeds only if a
// majority did within the new validity. It never re-creates a key that
// expired or was taken over; it sets the key again only on a node that
// did not renew it last round (one that lost it in a restart) and is
// admitted with this Client's settings, and counts the round only if it
// was decided before the deadline (docs/fencing.md, "Extends re-create
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
	r := c.extendRound(wctx, []*Lease{l}, []time.Duration{ttl})
	err = l.applyExtend(r, ttl, r.leases[0])
	if err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return err
}

// extended is one lease's part of an extend round.
type extended struct {
	yes, gone int     // nodes that renewed it; nodes where it is no longer ours
	errs      []error // per-node errors
	// renewed has bit i set where node i's renewal counted before the
	// round was decided (noteMissed adds the later ones).
	renewed uint64
}

// extendRound is one extend round for several leases: one script call per
// node carrying every lease (so renewing many leases costs one round trip
// per node, not one per lease).
type extendResult struct {
	t0      time.Time     // before the first request
	wire    time.Duration // the bound on each call of the round
	elapsed time.Duration // until every lease was decided
	leases  []extended
}

// extendRound renews each lease of ls for the matching ttl on every node,
// and waits until every lease is decided (a majority renewed it, or no
// longer can), every node answered, or ctx ends. The calls are not
// cancelled when it returns: the nodes that did not count should be
// extended too, so a lease keeps surviving as many node failures as it
// did; they are bounded by the node timeout of the shortest ttl.
func (c *Client) extendRound(ctx context.Context, ls []*Lease, ttls []time.Duration) extendResult {
	n := len(c.nodes)
	args := make([]script.ExtendArgs, len(ls))
	shortest := ttls[0]
	for i, l := range ls {
		args[i] = script.ExtendArgs{Key: l.key, Value: l.value, TTL: ttls[i], Meta: l.meta != ""}
		shortest = min(shortest, ttls[i])
	}
	calls := c.extendCalls(ls, args)
	res := extendResult{t0: c.cfg.clock.Now(), wire: c.nodeTimeout(shortest), leases: make([]extended, len(ls))}
	// A renewal counts only from the server its node was verified on, as
	// this round reads the proven ids (identity.go).
	proven := c.ident.proven()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(shortest))
	round := quorum.Start(c.pool, rctx, n, func(ctx context.Context, i int) (script.ExtendReply, error) {
		v, err := calls[i].Run(ctx, c.nodes[i].sn)
		c.observe(i, err)
		if err == nil && c.moved(proven, i, v.Ident) {
			c.proveSoon(shortest)
			if c.acqSettings != "" {
				// A server that lost its data is admitted again after its
				// quarantine, and only then gets the leases' keys back
				// (extendCalls): start that now, as an acquire would,
				// so that a lease held alone survives restarts too.
				c.admit.kick(i)
			}
		}
		return v, err
	})
	undecided := len(ls)
	decided := make([]bool, len(ls))
	replied := 0
	each := func(quorum.Reply[script.ExtendReply]) bool { return true }
	for undecided > 0 && replied < n {
		got := round.Await(ctx, 1, each)
		if len(got) == 0 {
			break // ctx ended
		}
		r := got[0]
		replied++
		for k := range ls {
			e := &res.leases[k]
			switch {
			case r.Err != nil:
				e.errs = append(e.errs, c.nodeErr(r.Node, r.Err))
			case renewedBy(r, k, proven):
				e.yes++
				e.renewed |= nodeBit(r.Node)
			case r.Val.Renewed(k):
				e.errs = append(e.errs, c.nodeErr(r.Node, errUnverified))
			default:
				e.gone++
			}
			if !decided[k] && (e.yes >= c.quorum || e.yes+n-replied < c.quorum) {
				decided[k] = true
				undecided--
			}
		}
	}
	res.elapsed = c.cfg.clock.Now().Sub(res.t0)
	c.spawn(func() {
		defer cancel()
		late := round.Wait()
		if c.acqSettings != "" {
			c.noteMissed(ls, res.leases, late, proven)
		}
	})
	return res
}

// renewedBy reports whether reply r renews lease k: the node renewed it,
// and the reply came from the server the node was verified on.
func renewedBy(r quorum.Reply[script.ExtendReply], k int, proven []string) bool {
	return r.Err == nil && r.Val.Renewed(k) && script.SameServer(proven[r.Node], r.Val.Ident)
}

// noteMissed records, once every call of an extend round is over, where
// each lease of ls was not renewed: the nodes its next round may
// re-create the key on (extendCalls). early holds the renewals counted
// while the round was decided, late the replies that came after.
func (c *Client) noteMissed(ls []*Lease, early []extended, late []quorum.Reply[script.ExtendReply], proven []string) {
	for k, l := range ls {
		renewed := early[k].renewed
		for _, r := range late {
			if renewedBy(r, k, proven) {
				renewed |= nodeBit(r.Node)
			}
		}
		l.missed.Store(^renewed)
	}
}

// extendCalls prepares each node's call of an extend round for ls: one
// call shared by every node, and one of its own for a node that may
// re-create a lease's key, that is, a node that did not renew some lease
// of ls in the lease's last round (docs/fencing.md, "Extends re-create
// what a restart lost"). Without the restart quarantine nothing is
// re-created: the nodes carry no settings to check.
func (c *Client) extendCalls(ls []*Lease, args []script.ExtendArgs) []*script.Extend {
	shared := script.NewExtend(args, "")
	calls := make([]*script.Extend, len(c.nodes))
	var own []script.ExtendArgs
	for i := range calls {
		calls[i] = shared
		if c.acqSettings == "" {
			continue
		}
		bit := nodeBit(i)
		some := false
		for _, l := range ls {
			if l.missed.Load()&bit != 0 {
				some = true
				break
			}
		}
		if !some {
			continue
		}
		own = append(own[:0], args...)
		for k, l := range ls {
			own[k].Recreate = l.missed.Load()&bit != 0
		}
		calls[i] = script.NewExtend(own, c.acqSettings)
	}
	return calls
}

// nodeBit is node i's bit in a lease's node masks (no bit past the 64th:
// a node beyond it never re-creates).
func nodeBit(i int) uint64 {
	if i >= 64 {
		return 0
	}
	return 1 << i
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
		// (docs/fencing.md, "Extends re-create what a restart lost").
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
