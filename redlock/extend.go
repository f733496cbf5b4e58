package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

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
// did; each is bounded by bound (Lease.Extend: the node timeout of the
// ttl; the renewer: renewBound).
func (c *Client) extendRound(ctx context.Context, ls []*Lease, ttls []time.Duration, bound time.Duration) extendResult {
	n := len(c.nodes)
	args := make([]script.ExtendArgs, len(ls))
	shortest := ttls[0]
	for i, l := range ls {
		args[i] = script.ExtendArgs{Key: l.key, Value: l.value, TTL: ttls[i], Meta: l.meta != ""}
		shortest = min(shortest, ttls[i])
	}
	calls := c.extendCalls(ls, args)
	res := extendResult{t0: c.cfg.clock.Now(), wire: bound, leases: make([]extended, len(ls))}
	// A renewal counts only from the server its node was verified on, as
	// this round reads the proven ids (identity.go).
	proven := c.ident.proven()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	round := quorum.Start(c.pool, rctx, n, func(ctx context.Context, i int) (script.ExtendReply, error) {
		v, err := calls[i].Run(ctx, c.nodes[i].sn)
		c.observe(i, err)
		if err == nil && c.moved(proven, i, v.Ident) {
			c.proveSoon(shortest)
			if c.dep.acquire != "" {
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
		if c.dep.acquire != "" {
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
// of ls in the lease's last round (docs/protocol.md, "Extends re-create
// what a restart lost"). Without the restart quarantine nothing is
// re-created: the nodes carry no settings to check.
func (c *Client) extendCalls(ls []*Lease, args []script.ExtendArgs) []*script.Extend {
	shared := script.NewExtend(args, "")
	calls := make([]*script.Extend, len(c.nodes))
	var own []script.ExtendArgs
	for i := range calls {
		calls[i] = shared
		if c.dep.acquire == "" {
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
		calls[i] = script.NewExtend(own, c.dep.acquire)
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
