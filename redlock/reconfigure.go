package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Changing the settings of a live deployment (docs/reconfiguration.md, "Changing
// the settings of a live deployment"). The nodes refuse every client whose
// settings differ from their marker, so a new max ttl, drift factor or
// node list cannot simply be started: the old clients must stop getting
// locks, every lease they hold must run out, and only then may clients of
// the new settings get one. Reconfigure does that in two steps:
//
//  1. Every old node is marked "reconfiguring to T" (a node that leaves:
//     "retired"). No client's settings equal either, so a client of the
//     old settings S is refused at once (ErrConfigMismatch) and never
//     writes to the node again. Step 2 starts only once enough old nodes
//     took the mark that the ones left with S are fewer than a majority of
//     the old list: from then on no client of S can be granted a lock.
//  2. Every new node is marked "reconfiguring to T" with a hold-off of
//     max(Q(S), Q(T)) stamped on its own clock; a client of T treats such a
//     node as one in quarantine (ReasonQuarantine, with the time left) and
//     admits it with T when the hold-off is over, as Reconfigure itself
//     does after waiting.
//
// On a node that carries either mark the extend script renews nothing and
// a release hands no key over, so a lease of S can be neither renewed nor
// handed on past step 1.
//
// Rejected: a per-node hold-off without step 1 (each node stamped as the
// command reaches it). A command that stalls after stamping some nodes
// leaves a majority of the old list granting to clients of S, while the
// stamped nodes' hold-offs run out: a client of T then locks on them
// while a lease of S is trusted, the double grant
// TestReconfigure_AStalledCommandGrantsNoSecondLease reproduces.

// ErrReconfigureIncomplete reports that Reconfigure did not finish: some
// nodes did not answer (or ctx ended) before its step was done. What it
// wrote is safe to leave (a node it marked refuses the old settings and
// admits the new ones only after its hold-off); running Reconfigure again
// with the same arguments goes on from there.
var ErrReconfigureIncomplete = errors.New("redlock: reconfiguration incomplete: run it again with the same arguments")

// oldSettings are the settings the old clients run with.
func oldSettings(from []redis.UniversalClient, opts []Option) (settings, error) {
	if len(from) == 0 {
		return settings{}, errors.New("redlock: Reconfigure: no old nodes")
	}
	// Checked as New checks a client's options (the drift factor by its
	// option, the max ttl against it), so that the old settings are ones
	// an old client could have run with.
	cfg := defaults()
	if err := applyOptions(&cfg, opts); err != nil {
		return settings{}, fmt.Errorf("redlock: Reconfigure: old settings: %w", err)
	}
	return settings{nodes: len(from), maxTTL: cfg.maxTTL, factor: cfg.factor}, nil
}

// reconfig is one run of Reconfigure.
type reconfig struct {
	c        *Client
	olds     []*node
	from, to string
	holdOff  time.Duration
	rec      string // the change's record (script.ChangeRecord), once the look is in
	// readFrom: the old settings (from, holdOff) are read from the old
	// nodes' look (oldFromLooks), not given.
	readFrom bool
}

// run is the reconfiguration, one phase after the other: read every
// node, check that each can be moved (or that nothing is left to do),
// refuse the old settings and mark the new nodes (step 1), stamp the
// hold-off on the new nodes (step 2), and wait it out to admit them.
func (r *reconfig) run(ctx context.Context) error {
	c := r.c
	oldLook, newLook, err := r.read(ctx)
	if err != nil {
		return err
	}
	if err := r.check(oldLook, newLook); err != nil {
		return err
	}
	stays := map[string]bool{}
	for _, l := range newLook {
		stays[l.id] = true
	}
	if done, err := r.nothingToDo(oldLook, newLook, stays); done || err != nil {
		return err
	}
	c.cfg.logger.Info("redlock: reconfiguring: every node answered and can be moved", "from", r.from, "to", r.to,
		"holdoff", r.holdOff, "step", "checked")
	leftOld, err := r.refuseOld(ctx, oldLook, newLook, stays)
	if err != nil {
		return err
	}
	start := time.Now()
	waiting, leftNew := r.holdNew(ctx)
	if leftNew, err = r.admitNew(ctx, waiting, leftNew, start); err != nil {
		return err
	}
	if leftOld != nil || leftNew != nil {
		return errors.Join(append(append([]error{fmt.Errorf("%w; the nodes named below did not take their step (the others did)", ErrReconfigureIncomplete)}, leftOld...), leftNew...)...)
	}
	c.cfg.logger.Info("redlock: reconfigured", "from", r.from, "to", r.to, "took", time.Since(start))
	return nil
}

// refuseOld is step 1: it refuses the old settings on the old nodes, and
// marks the new nodes that are not old ones, so that no new node is left
// bare for a client of the new settings to admit as a brand-new
// deployment. It returns the old nodes that did not take their step, or
// an error when too few old or new nodes did.
func (r *reconfig) refuseOld(ctx context.Context, oldLook, newLook []look, stays map[string]bool) ([]error, error) {
	c := r.c
	news := c.nodes
	need := script.ReconfigureNeed(len(r.olds))
	olds := map[string]bool{}
	for _, l := range oldLook {
		if l.err == nil {
			olds[l.id] = true
		}
	}
	refused := fanOut(ctx, r.olds, func(ctx context.Context, nd *node) stepResult {
		if err := oldLook[nd.idx].err; err != nil {
			return stepResult{err: err} // down: not waited for again
		}
		s := script.StepRetire
		if stays[oldLook[nd.idx].id] {
			s = script.StepRefuse
		}
		return r.step(ctx, nd, s)
	})
	joined := fanOut(ctx, news, func(ctx context.Context, nd *node) stepResult {
		if olds[newLook[nd.idx].id] {
			return stepResult{} // marked as an old node
		}
		return r.step(ctx, nd, script.StepRefuse)
	})
	var acked int
	var leftOld, leftJoin []error
	marked := map[string]bool{}
	for i, res := range refused {
		if err := res.failed(); err != nil {
			leftOld = append(leftOld, &NodeError{Node: i, Addr: r.olds[i].name, Err: fmt.Errorf("old node: %w", err)})
			continue
		}
		acked++
		marked[oldLook[i].id] = true
	}
	for i, res := range joined {
		if err := res.failed(); err != nil {
			leftJoin = append(leftJoin, c.nodeErr(i, fmt.Errorf("new node: %w", err)))
			continue
		}
		if !olds[newLook[i].id] {
			marked[newLook[i].id] = true
		}
	}
	var newMarked int
	for _, l := range newLook {
		if marked[l.id] {
			newMarked++
		}
	}
	if needNew := quorum.Majority(len(news)); acked < need || newMarked < needNew {
		return nil, errors.Join(append([]error{fmt.Errorf("%w; step 1 (refuse the old settings, mark the new nodes) reached %d of %d old nodes (%d must) and %d of %d new ones (%d must): the nodes it reached refuse the old settings now, no node was given a hold-off, and no client of either settings gets a lock on them until it is run again; do not start clients of the new settings yet", ErrReconfigureIncomplete, acked, len(r.olds), need, newMarked, len(news), needNew)}, append(leftOld, leftJoin...)...)...)
	}
	// The attribute step=marked is what quorumlock reconfigure waits for
	// to tell the operator to start the new clients.
	c.cfg.logger.Info("redlock: reconfiguring: the old settings are refused and the new nodes marked; clients of the new settings may start (they wait out the hold-off)", "from", r.from, "to", r.to, "step", "marked")
	return leftOld, nil
}

// holdNew is step 2: it stamps the hold-off on the new nodes, each on its
// own clock. It returns the nodes whose hold-off runs, with the time left
// on it, and the nodes that did not take the step.
func (r *reconfig) holdNew(ctx context.Context) (map[int]time.Duration, []error) {
	c := r.c
	news := c.nodes
	held := fanOut(ctx, news, func(ctx context.Context, nd *node) stepResult {
		return r.step(ctx, nd, script.StepHold)
	})
	var leftNew []error
	waiting := map[int]time.Duration{}
	for i, res := range held {
		if err := res.failed(); err != nil {
			leftNew = append(leftNew, c.nodeErr(i, fmt.Errorf("new node: %w", err)))
			continue
		}
		if res.rep.Status == script.ReconfigureDone {
			waiting[i] = res.rep.Left
		}
	}
	c.cfg.logger.Info("redlock: reconfiguring: hold-off stamped", "from", r.from, "to", r.to, "holdoff", r.holdOff, "nodes", len(waiting))
	return waiting, leftNew
}

// admitNew waits the hold-off out and admits the new nodes with the new
// settings; clients of the new settings do the same on their own. It
// returns leftNew with the nodes it could not admit added, or an error
// when ctx ended first (start: when the hold-off was stamped).
func (r *reconfig) admitNew(ctx context.Context, waiting map[int]time.Duration, leftNew []error, start time.Time) ([]error, error) {
	c := r.c
	news := c.nodes
	for len(waiting) > 0 {
		var soonest time.Duration
		for _, left := range waiting {
			if soonest == 0 || left < soonest {
				soonest = left
			}
		}
		soonest = max(soonest, time.Millisecond)
		t := time.NewTimer(soonest)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w; the hold-off was stamped %v ago and ends by itself: clients of the new settings admit the nodes when it does: %w", ErrReconfigureIncomplete, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-t.C:
		}
		for i := range waiting {
			res := r.step(ctx, news[i], script.StepFinish)
			switch {
			case refusal(res.err) != nil:
				// Retrying cannot help, and the hold-off would run out
				// meanwhile and read as lost: say why.
				delete(waiting, i)
				leftNew = append(leftNew, c.nodeErr(i, res.err))
			case res.err != nil:
				waiting[i] = 100 * time.Millisecond
			case res.rep.Status == script.ReconfigureDone:
				delete(waiting, i)
				c.admit.saw(i)
			case res.rep.Status == script.ReconfigureWaiting && res.rep.Left > 0:
				waiting[i] = res.rep.Left
			default:
				// It lost its data (or its hold-off) meanwhile: it
				// serves an ordinary quarantine from its next use.
				delete(waiting, i)
				leftNew = append(leftNew, c.nodeErr(i, errors.New("new node lost its hold-off (its data?) before it ended: it serves an ordinary quarantine")))
			}
		}
	}
	return leftNew, nil
}
