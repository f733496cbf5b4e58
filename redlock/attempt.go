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

func acquired(r quorum.Reply[script.AcquireReply]) bool {
	return r.Err == nil && r.Val.Status == script.Granted
}

// attempt is one acquisition: a round of the acquire script on every node,
// the fencing commit round when enabled, and either a lease or a cleanup.
// Its values are computed once and shared read-only by the per-node calls.
type attempt struct {
	c      *Client
	key    string
	value  string
	ttl    time.Duration
	t0     time.Time
	acq    *script.Acquire // the acquire script call, sent to every node
	waiter string          // the Lock call's id in the key's line ("" for TryLock)
	meta   string          // the call's metadata (WithMetadata), stored where the key is granted
	fenced bool            // mint a fencing token: WithFencing, or the call's Fenced
	// rel is the release of the attempt's value, sharing acq's boxed
	// arguments; the call itself is built when needed (see release).
	rel script.ReleaseArgs

	// proven is the id each node was verified with when the round began
	// ("" for none): its replies count only from that server.
	proven  []string
	round   *quorum.Round[script.AcquireReply]
	stop    context.CancelFunc // ends the round's calls; owned by whoever waits for them
	replies []quorum.Reply[script.AcquireReply]
	elapsed time.Duration // from t0 to the decision (or to the end of the commit round)

	granted    int
	busy       []int64 // remaining ms of the other holder's key, per busy node
	unadmitted []int
	heldOff    int           // of unadmitted: nodes in a reconfiguration's hold-off
	unverified []int         // nodes that answered before their identity was verified, or from another server: their votes did not count
	refused    int           // nodes that refused this client's configuration (ErrNodeRefused)
	down       []*NodeError  // nodes that did not answer: transport errors, no reply in time, not waited for
	answered   int           // replies without an error
	handed     []handOff     // nodes where the key holds the Lock call's waiter id
	ahead      bool          // a node's key is handed to a Lock call ahead of this one
	cleaned    chan struct{} // closed once a failed attempt's cleanup calls are over
	mismatch   *ConfigError
	token      uint64
	fenceErr   bool
	errs       []error
}

// release builds the release script call for this attempt's value. A
// failed attempt's cleanup passes back, which puts its Lock call back in
// line in its place; the lease's Release does not, which takes the call
// out of the line (see release.lua).
func (a *attempt) release(back bool) *script.Release {
	return a.c.boxes.Release(a.releaseArgs(back))
}

// releaseArgs is release's arguments, sharing the attempt's boxes (a lease
// keeps them without: see Lease.rel).
func (a *attempt) releaseArgs(back bool) script.ReleaseArgs {
	r := a.rel
	r.Back, r.Window = back, a.c.handoffWindow(a.ttl)
	return r
}

// send starts the round. Its calls are bounded by the node timeout but not
// cancelled with the caller's ctx: once a majority granted, the calls to
// the other nodes must still go out, so that every reachable node holds
// the key and the lock survives as many node failures as it can. A failed
// attempt waits for them in the background too (see abandon).
func (a *attempt) send(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.c.nodeTimeout(a.ttl))
	a.stop = cancel
	a.proven = a.c.ident.proven()
	a.round = quorum.StartOwned(a.c.pool, rctx, cancel, len(a.c.nodes), func(ctx context.Context, i int) (script.AcquireReply, error) {
		r, err := a.acq.Run(ctx, a.c.nodes[i].sn)
		a.c.observe(i, err)
		if err == nil {
			a.c.moved(a.proven, i, r.Ident)
		}
		return r, err
	})
}

// await waits until a majority granted, that became impossible (nodes that
// missed their last deadline are not waited for), the node timeout passed,
// or ctx ended, and records how long the round took.
func (a *attempt) await(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, a.c.nodeTimeout(a.ttl))
	defer cancel()
	a.replies = a.round.AwaitDiscounting(wctx, a.c.quorum, a.votes, a.c.missedLast)
	// Whether the refusals are why the attempt failed, or whether a
	// majority of nodes answers at all, can depend on the nodes not heard
	// from yet (see failure): hear them out, up to the node timeout, so
	// that contention is not called a configuration error, which ends
	// Lock at once, and a held key is not called an unavailable service
	// or the other way round. The round was decided without a majority of
	// grants; what it hears now changes only what the failure says (a
	// grant heard late is cleaned up with the others, and a majority of
	// them is a lease like any other, since won checks the grants and the
	// validity after this wait).
	if a.refusalsInDoubt() {
		all := func(quorum.Reply[script.AcquireReply]) bool { return true }
		a.replies = append(a.replies, a.round.Await(wctx, len(a.c.nodes)-len(a.replies), all)...)
	} else if need := a.heldInDoubt(); need > 0 {
		// Until a majority answered, or that became impossible: nodes
		// that missed their last deadline are not waited for, as in the
		// round itself, and those heard from already count as no more.
		heard := make([]bool, len(a.c.nodes))
		for _, r := range a.replies {
			heard[r.Node] = true
		}
		answers := func(r quorum.Reply[script.AcquireReply]) bool { return r.Err == nil }
		skip := func(i int) bool { return heard[i] || a.c.missedLast(i) }
		a.replies = append(a.replies, a.round.AwaitDiscounting(wctx, need, answers, skip)...)
	}
	a.elapsed = a.c.cfg.clock.Now().Sub(a.t0)
	a.c.sawRound(a.elapsed)
	a.tally(ctx.Err() == nil && wctx.Err() != nil)
}

// won reports whether the attempt holds a usable lock so far.
func (a *attempt) won(ctx context.Context) bool {
	return a.mismatch == nil && !a.fenceErr && a.granted >= a.c.quorum && ctx.Err() == nil &&
		drift.Validity(a.ttl, a.elapsed, a.c.cfg.factor) > 0
}

// commit is the fencing round (docs/protocol.md, "The protocol"): the
// token (fenceToken) is raised on every node where our key still holds
// our value, and is usable only with a quorum of commits. The validity is
// recomputed to the end of this round.
func (a *attempt) commit(ctx context.Context) {
	c := a.c
	defer func() { a.elapsed = c.cfg.clock.Now().Sub(a.t0) }()
	token, err := fenceToken(a.key, a.replies)
	if err != nil {
		a.fail(err)
		return
	}
	p := script.NewCommit(script.CommitArgs{Key: a.key, Value: a.value, Token: token, Keep: c.dep.fenceKeep(a.ttl)})

	// Like the acquire round, commits to the nodes that did not count
	// still go out after success: a fence raised on more nodes survives
	// more restarts.
	// A commit counts only from the server its node was verified on, as
	// this round reads the proven ids (identity.go).
	proven := c.ident.proven()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(a.ttl))
	round := quorum.Start(c.pool, rctx, len(c.nodes), func(ctx context.Context, i int) (script.CommitReply, error) {
		r, err := p.Run(ctx, c.nodes[i].sn)
		c.observe(i, err)
		if err == nil && c.moved(proven, i, r.Ident) {
			c.proveSoon(a.ttl)
		}
		return r, err
	})
	wctx, wcancel := context.WithTimeout(ctx, c.nodeTimeout(a.ttl))
	counts := func(r quorum.Reply[script.CommitReply]) bool {
		return r.Err == nil && r.Val.Committed && script.SameServer(proven[r.Node], r.Val.Ident)
	}
	got := round.Await(wctx, c.quorum, counts)
	wcancel()
	c.spawn(func() {
		defer cancel()
		round.Wait()
	})
	var yes int
	var errs []error
	for _, r := range got {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("fence commit: %w", r.Err)))
		case counts(r):
			yes++
		case r.Val.Committed:
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("fence commit: %w", errUnverified)))
		default:
			errs = append(errs, c.nodeErr(r.Node, errors.New("fence commit: key no longer ours")))
		}
	}
	if yes < c.quorum {
		a.fail(errors.Join(append([]error{fmt.Errorf("fence commit reached %d of %d nodes, %d needed", yes, len(c.nodes), c.quorum)}, errs...)...))
		return
	}
	a.token = token
}

// fail marks the attempt failed by its fencing step.
func (a *attempt) fail(err error) {
	a.fenceErr = true
	a.errs = append(a.errs, err)
}

// leave hands the round's stragglers to background work that waits for
// them; on success they are part of the lock. A straggler that says it is
// not admitted starts its admission, as one that answered in time does,
// and one not verified yet its proof (see proveSoon).
func (a *attempt) leave() {
	c, round, stop, ttl := a.c, a.round, a.stop, a.ttl
	c.spawn(func() {
		defer stop()
		// One reply at a time, so that a node's admission does not wait
		// for the slowest straggler.
		each := func(quorum.Reply[script.AcquireReply]) bool { return true }
		for {
			got := round.Await(context.Background(), 1, each)
			if len(got) == 0 {
				break
			}
			r := got[0]
			if r.Err == nil && !c.verified(r.Node) {
				c.proveSoon(ttl)
			}
			if r.Err == nil && r.Val.Status == script.Unadmitted {
				c.admit.lost(r.Node)
				c.admit.kick(r.Node)
			}
		}
		round.Wait()
		c.freeRound()
	})
}

// abandon releases a failed round's key on every node that granted or
// answered with an error: an unanswered SET may still land, and the
// release leaves a tombstone there that makes it fail.
// A node that answered anything else is settled and gets nothing. A node
// that has not answered yet is decided by its reply, in the background: a
// grant or an error gets the release, a refusal nothing. Calls already on
// the wire usually answer within a round trip, and a refusal needs no
// release, so contention costs no release per late refusal. abandon waits
// only for the releases of the nodes that granted, so a failed attempt
// leaves nothing behind on the responsive nodes that answered in time when
// it returns, without waiting for unresponsive ones; the rest is handled
// in the background, detached from the caller's ctx, each release bounded
// by the cleanup timeout.
//
// The round's calls are not cancelled: each is already bounded by the node
// timeout (send), and a cancelled call on the wire ends as "context
// canceled" instead of with the node's word, which would cost a release
// (and a tombstone) where a refusal needs none, and would hide a wiped
// node's "not admitted": like leave, the background starts the admission
// of a node whose late reply says so (docs/protocol.md, Liveness).
func (a *attempt) abandon() {
	c := a.c
	granted := make(map[int]bool, len(a.replies))
	// A node that answered anything but "granted" is settled: its script
	// ran once, atomically, and did not take the key (it answers "granted"
	// when the key already holds our value, as after a retried call), so
	// no late SET can follow there and it needs neither a release nor a
	// tombstone. One that granted or answered with an error gets both now.
	settled := make([]bool, len(c.nodes))
	answered := make([]bool, len(c.nodes))
	for _, r := range a.replies {
		answered[r.Node] = true
		if acquired(r) {
			granted[r.Node] = true
		} else if r.Err == nil {
			settled[r.Node] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	ra := a.release(true)
	rel := quorum.Start(c.pool, ctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		if settled[i] || !answered[i] {
			return false, nil
		}
		return c.releaseOn(ctx, i, ra, a.ttl, time.Time{})
	})
	if len(granted) > 0 {
		rel.Await(ctx, len(granted), func(r quorum.Reply[bool]) bool { return r.Err == nil && granted[r.Node] })
	}
	round, stop := a.round, a.stop
	a.cleaned = make(chan struct{})
	cleaned := a.cleaned
	c.spawn(func() {
		defer close(cleaned)
		defer cancel()
		defer stop()
		// The round's calls first: its slot goes back once they are over
		// (see maxRounds), whatever the releases below take.
		late := round.Wait()
		c.freeRound()
		rel.Wait()
		// The late replies (each within a round trip, or at the node
		// timeout from a node that does not answer): a grant, or an
		// error, which leaves the outcome unknown, gets the release; a
		// refusal settles the node. A node that is not admitted starts
		// its admission, as in leave.
		var release []int
		for _, r := range late {
			switch {
			case acquired(r) || r.Err != nil:
				release = append(release, r.Node)
			case r.Val.Status == script.Unadmitted:
				c.admit.lost(r.Node)
				c.admit.kick(r.Node)
			}
		}
		quorum.Start(nil, context.Background(), len(release), func(_ context.Context, j int) (struct{}, error) {
			c.releaseOne(a.key, release[j], ra, a.ttl) // bounded by the cleanup timeout
			return struct{}{}, nil
		}).Wait()
	})
}
