package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

func acquired(r quorum.Reply[script.AcquireReply]) bool {
	return r.Err == nil && r.Val.Status == script.Granted
}

// votes reports whether r is a grant that counts: from the server its
// node was verified on, as the round read the proven ids (see
// identity.go).
func (a *attempt) votes(r quorum.Reply[script.AcquireReply]) bool {
	return acquired(r) && script.SameServer(a.proven[r.Node], r.Val.Ident)
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

// newAttempt prepares one attempt. waiter is the id of the Lock call it
// belongs to ("" for TryLock), which puts the call in the key's line on
// the nodes where it fails, at place, so that a release wakes it by name
// (see acquire.lua).
func (c *Client) newAttempt(key string, ttl time.Duration, waiter string, place int64, ca callArgs) *attempt {
	a := &attempt{c: c, key: key, value: newValue(), ttl: ttl, t0: c.cfg.clock.Now(), waiter: waiter, meta: ca.meta, fenced: ca.fenced}
	a.acq = c.boxes.Acquire(script.AcquireArgs{Key: key, Value: a.value, TTL: ttl, Settings: c.acqSettings,
		Fencing: ca.fenced, Waiter: waiter, Place: place, Line: c.line, Metadata: ca.meta})
	a.rel = a.acq.ReleaseArgs()
	return a
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

// refusalsInDoubt reports whether a round decided without a majority of
// votes has refusals among its replies and cannot yet tell whether they
// are why: counting them as grants makes no majority with the grants
// heard so far, but might with the nodes not heard from.
func (a *attempt) refusalsInDoubt() bool {
	granted, refused := 0, 0
	for _, r := range a.replies {
		switch {
		case a.votes(r):
			granted++
		case refusal(r.Err) != nil:
			refused++
		}
	}
	q := a.c.quorum
	return refused > 0 && granted+refused < q && granted+refused+len(a.c.nodes)-len(a.replies) >= q
}

// heldInDoubt is, for a round decided without a majority of votes that
// found the key held by another owner on some nodes and heard fewer than
// a majority of nodes answer, how many more answers would make a
// majority, when the nodes not heard from (but those that missed their
// last deadline) could give them: whether the key is held (a majority
// answered) or the service is unavailable (fewer did) depends on them.
// Otherwise 0.
func (a *attempt) heldInDoubt() int {
	answered, busy := 0, 0
	heard := make([]bool, len(a.c.nodes))
	for _, r := range a.replies {
		heard[r.Node] = true
		if r.Err != nil {
			continue
		}
		answered++
		switch r.Val.Status {
		case script.Held, script.Ahead, script.Queued:
			busy++
		}
	}
	expected := 0
	for i, h := range heard {
		if !h && !a.c.missedLast(i) {
			expected++
		}
	}
	q := a.c.quorum
	if busy == 0 || answered >= q || answered+expected < q {
		return 0
	}
	return q - answered
}

// tally classifies the replies. timedOut says the round ran out of time.
func (a *attempt) tally(timedOut bool) {
	c := a.c
	for _, r := range a.replies {
		if r.Err == nil {
			a.answered++
		}
		switch {
		case r.Err != nil:
			ne := c.nodeErr(r.Node, r.Err)
			if errors.Is(ne.Err, ErrNodeRefused) {
				a.refused++
			} else {
				a.down = append(a.down, ne)
			}
			a.errs = append(a.errs, ne)
		case r.Val.Status == script.Unadmitted && a.proven[r.Node] != "":
			// A verified node that lost its data answers with no id, and
			// no longer counts (see moved); it is proven again in the
			// background, since its quarantine keeps its vote out anyway.
			// Its admission goes through its entry, whatever server that
			// reaches.
			if !script.SameServer(a.proven[r.Node], r.Val.Ident) {
				c.proveSoon(a.ttl)
			}
			c.admit.lost(r.Node)
			a.unadmitted = append(a.unadmitted, r.Node)
			a.errs = append(a.errs, c.nodeErr(r.Node, ErrNodeQuarantined))
		case !script.SameServer(a.proven[r.Node], r.Val.Ident):
			a.unverified = append(a.unverified, r.Node)
			a.errs = append(a.errs, c.nodeErr(r.Node, errUnverified))
		case r.Val.Status == script.Granted:
			a.granted++
			c.admit.saw(r.Node)
		case r.Val.Status == script.Held:
			c.admit.saw(r.Node)
			a.errs = append(a.errs, c.nodeErr(r.Node, ErrNodeHeld))
			a.busy = append(a.busy, r.Val.PTTL)
		case r.Val.Status == script.Ahead:
			c.admit.saw(r.Node)
			a.ahead = true
			a.errs = append(a.errs, c.nodeErr(r.Node, ErrNodeHeld))
			a.busy = append(a.busy, r.Val.PTTL)
		case r.Val.Status == script.HandedHere:
			c.admit.saw(r.Node)
			a.handed = append(a.handed, handOff{node: r.Node, server: r.Val.Ident})
			a.errs = append(a.errs, c.nodeErr(r.Node, errHandedHere))
		case r.Val.Status == script.Queued:
			c.admit.saw(r.Node)
			a.errs = append(a.errs, c.nodeErr(r.Node, errQueued))
			a.busy = append(a.busy, max(r.Val.PTTL, 0))
		case r.Val.Status == script.Mismatch && c.movingHere(r.Val.Marker):
			// Held off by a reconfiguration to our settings: in
			// quarantine until the hold-off ends (reconfigure.go).
			c.admit.lost(r.Node)
			c.admit.reconfigured()
			a.unadmitted = append(a.unadmitted, r.Node)
			a.heldOff++
			a.errs = append(a.errs, c.nodeErr(r.Node, errHeldOff))
		case r.Val.Status == script.Mismatch:
			ce := c.mismatch(r.Node, r.Val.Marker, false)
			c.admit.conflicted(ce)
			if a.mismatch == nil {
				a.mismatch = ce
			}
			a.errs = append(a.errs, c.nodeErr(r.Node, ce))
		default:
			a.errs = append(a.errs, c.nodeErr(r.Node, fmt.Errorf("acquire script status %d", r.Val.Status)))
		}
	}
	// Nodes not heard from are an error only if the round ran out of time;
	// a round decided early simply did not wait for them.
	n := len(c.nodes)
	if len(a.replies) == n || a.granted >= c.quorum {
		return
	}
	for _, i := range missingOf(n, a.replies) {
		var ne *NodeError
		switch {
		case timedOut:
			c.nodes[i].missed.Store(true)
			ne = c.nodeErr(i, fmt.Errorf("no reply within %v: %w", c.nodeTimeout(a.ttl), context.DeadlineExceeded))
		case c.missedLast(i):
			ne = c.nodeErr(i, errNotWaited)
		default:
			continue
		}
		// A node whose TLS handshakes are refused can miss the round
		// (go-redis backs off between its dials): its cause names the
		// refusal, and it counts as one.
		if errors.Is(ne.Err, ErrNodeRefused) {
			a.refused++
		} else {
			a.down = append(a.down, ne)
		}
		a.errs = append(a.errs, ne)
	}
}

// errNotWaited is the cause for a node an attempt did not wait for: it
// missed its previous deadline, and the attempt could not succeed without
// it. nodeErr adds the node's last transport error when it knows one.
var errNotWaited = fmt.Errorf("not waited for: it missed its previous deadline: %w", context.DeadlineExceeded)

// won reports whether the attempt holds a usable lock so far.
func (a *attempt) won(ctx context.Context) bool {
	return a.mismatch == nil && !a.fenceErr && a.granted >= a.c.quorum && ctx.Err() == nil &&
		drift.Validity(a.ttl, a.elapsed, a.c.cfg.factor) > 0
}

// failure builds the error of a failed attempt.
func (a *attempt) failure(ctx context.Context) *NotObtainedError {
	c := a.c
	n := len(c.nodes)
	e := &NotObtainedError{Key: a.key, Granted: a.granted, Needed: c.quorum, Nodes: n, Replied: len(a.replies)}
	// The round stops as soon as its outcome is decided, so the nodes
	// counted below are those heard from by then: more may be in the
	// same state.
	atLeast := ""
	if e.Replied < n {
		atLeast = "at least "
	}
	switch {
	case ctx.Err() != nil:
		e.Reason, e.Detail = ReasonCancelled, fmt.Sprintf("ctx ended during the attempt, after %d of %d nodes granted", a.granted, n)
		e.Errs = append(e.Errs, ctx.Err())
	case a.fenceErr:
		e.Reason, e.Detail = ReasonFenceCommit, "fencing commit failed"
	case a.granted >= c.quorum:
		e.Reason, e.Detail = ReasonValidity, fmt.Sprintf("validity used up: the round took %v of a %v ttl", a.elapsed, a.ttl)
	case a.refused > 0 && a.granted+a.refused >= c.quorum:
		// The refusals are why: counting them as grants would make a
		// majority. A node not heard from counts as neither: await heard
		// the round out when that could change the answer
		// (refusalsInDoubt). Counting it as a possible grant called
		// contention a configuration error whenever a refusal came in
		// before the holder's nodes did.
		e.Reason, e.Detail = ReasonRefused, fmt.Sprintf("%d of %d nodes refused this client's configuration (password, ACL user, TLS certificates, database or role): %d granted, %d needed", a.refused, n, a.granted, c.quorum)
	case len(a.busy) > 0 && a.answered < c.quorum && len(a.down) > 0:
		// The key is held on some nodes, but fewer than a majority
		// answered: nobody could have been granted it here, and whether
		// anyone holds it is unknown. The service is what failed.
		e.Reason, e.Detail = ReasonNoQuorum, fmt.Sprintf("no quorum: %s; held by another owner on %s%d, %d granted, %d needed",
			unreachable(a.down, n), atLeast, len(a.busy), a.granted, c.quorum)
	case len(a.busy) > 0:
		e.Reason, e.Detail = ReasonHeld, fmt.Sprintf("held elsewhere: by another owner on %s%d of %d nodes (%d granted, %d needed)",
			atLeast, len(a.busy), n, a.granted, c.quorum)
		e.Wait = freeIn(a.busy, c.quorum, n)
	case len(a.unadmitted) > 0 && (a.granted+len(a.unadmitted) >= c.quorum || n-len(a.down) >= c.quorum):
		// Quarantines stand in the way: the unadmitted nodes would make a
		// majority, or the nodes that did not answer are too few to
		// explain the failure on their own (the round was decided before
		// the rest were heard, a new deployment with one node down). It
		// decides nothing on the nodes: only what the error says, and
		// when a waiting Lock tries again (waiter.nextDelay).
		e.Reason = ReasonQuarantine
		switch a.heldOff {
		case len(a.unadmitted):
			e.Detail = fmt.Sprintf("%s%d of %d nodes are in a reconfiguration's hold-off (a change to this client's settings is under way)",
				atLeast, a.heldOff, n)
		case 0:
			e.Detail = fmt.Sprintf("%s%d of %d nodes are in restart quarantine (they are new, or lost their data)",
				atLeast, len(a.unadmitted), n)
		default:
			e.Detail = fmt.Sprintf("%s%d of %d nodes are in a reconfiguration's hold-off (a change to this client's settings is under way) and %d in restart quarantine (new, or lost their data)",
				atLeast, a.heldOff, n, len(a.unadmitted)-a.heldOff)
		}
		if len(a.down) > 0 {
			e.Detail += "; " + unreachable(a.down, n)
		}
	case len(a.down) > 0:
		e.Reason, e.Detail = ReasonNoQuorum, fmt.Sprintf("no quorum: %s; %d granted, %d needed", unreachable(a.down, n), a.granted, c.quorum)
	default:
		e.Reason, e.Detail = ReasonNoQuorum, fmt.Sprintf("no quorum: %d of %d nodes granted, %d needed", a.granted, n, c.quorum)
	}
	e.Errs = append(e.Errs, a.errs...)
	return e
}

// unreachable says how many of n nodes did not answer or answered with an
// error, and why, the first node's cause in a few words: "3 of 5 nodes
// unreachable (connection refused)", "1 of 5 nodes failing (OOM ...)".
func unreachable(down []*NodeError, n int) string {
	what := "unreachable"
	var reply redis.Error
	if errors.As(down[0].Err, &reply) {
		what = "failing" // it answered, with an error
	}
	return fmt.Sprintf("%d of %d nodes %s (%s)", len(down), n, what, shortCause(down[0].Err))
}

// shortCause names a node's transport error in a few words.
func shortCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "address does not resolve"
		}
		return "name lookup failed"
	case errors.Is(err, errNotWaited):
		return "not waited for: it missed its previous deadline"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return "connection closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "no reply in time"
	}
	return err.Error()
}

// freeIn estimates when a quorum of nodes could be free of the other
// holder's key, from the remaining ttls that busy nodes reported: nodes
// that did not report busy count as free now. 0 means unknown.
func freeIn(busy []int64, q, n int) time.Duration {
	free := n - len(busy)
	if len(busy) == 0 || free >= q {
		return 0
	}
	busy = slices.Clone(busy)
	slices.Sort(busy)
	ms := busy[q-free-1]
	if ms < 0 { // -1: a key without expiry, -2: gone by now
		if ms == -2 {
			return time.Millisecond
		}
		return 0
	}
	return time.Duration(ms)*time.Millisecond + time.Millisecond
}

// maxRounds is the most acquisition rounds one Client has in flight: one
// full pipeline per node (see script.maxBatch). An attempt counts from
// before its t0 until every call of its round is over (leave and abandon
// give the slot back), not only until the round is decided: a round
// decided at once (nodes that missed their last deadline are not waited
// for) still has its calls queued for the nodes. Its cleanup does not
// count: each failed attempt leaves at most one, bounded by the cleanup
// timeout, so the cleanups pending are bounded too, by about maxRounds
// times the cleanup timeout over the node timeout.
//
// Without a bound, a burst of Lock calls on many keys (10,000 Do calls
// started within a second, on a host whose cores the nodes share) queues
// more calls in each node's batcher than the node answers within the node
// timeout: every round in the queue times out, each leaves a cleanup of up
// to the cleanup timeout, and Lock retries within 20 to 100 ms, so the
// retries and their cleanups outgrow the nodes' answers and the process's
// goroutines and memory grow until it is killed (docs/performance.md,
// "Many leases on one Client"). With the bound, the calls beyond it wait
// in this process, before their attempt starts: a wait that costs no
// node a call and no lease any validity.
const maxRounds = 256

// takeRound waits for one of the Client's maxRounds slots for an
// acquisition round (see freeRound). It fails only when ctx ends first:
// then no node was contacted.
func (c *Client) takeRound(ctx context.Context, key string) error {
	select {
	case c.rounds <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.rounds <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &NotObtainedError{Key: key, Reason: ReasonCancelled, Needed: c.quorum, Nodes: len(c.nodes),
			Detail: fmt.Sprintf("ctx ended while the attempt waited for one of this Client's %d acquisition rounds in flight to end; no node was contacted", maxRounds),
			Errs:   []error{ctx.Err()}}
	}
}

// freeRound gives back the slot of an attempt whose round's calls are
// all over.
func (c *Client) freeRound() { <-c.rounds }

// outcome is what one call of try hands back to TryLock and Lock.
type outcome struct {
	lease      *Lease
	err        error // a *NotObtainedError, a *ConfigError or ErrClosed
	wait       time.Duration
	took       time.Duration
	unadmitted []int
	unverified []int
	handed     []handOff // nodes that answered that a release handed the key to the Lock call
	ahead      bool      // a node's key was handed to a Lock call ahead of this one
	// cleaned is closed once the failed attempt's cleanup calls are over
	// (nil: none): a call that leaves the line or gives keys back sends
	// that after them, so that a cleanup cannot put it back in line.
	cleaned <-chan struct{}
}

// try runs one acquisition attempt (waiter and place: see newAttempt). On
// any failure it releases the key on every node before returning (nodes
// that do not answer are released in the background).
func (c *Client) try(ctx context.Context, key string, ttl time.Duration, waiter string, place int64, ca callArgs) outcome {
	if err := c.takeRound(ctx, key); err != nil {
		return outcome{err: err}
	}
	a := c.newAttempt(key, ttl, waiter, place, ca)
	a.send(ctx)
	a.await(ctx)
	if a.won(ctx) && a.fenced {
		a.commit(ctx)
	}
	if a.won(ctx) {
		l := c.newLease(a)
		if l == nil {
			// Close began during the attempt: a lease handed out now could
			// outlive the Client's background work. Give the lock back.
			a.abandon()
			return outcome{err: ErrClosed, cleaned: a.cleaned}
		}
		a.leave()
		c.inst.attempt("obtained", key, a.elapsed)
		c.tried(ctx, a, "obtained")
		for _, i := range a.unadmitted {
			c.admit.kick(i) // start its admission; the lock did not need it
		}
		if len(a.unverified) > 0 {
			c.proveSoon(ttl) // nor its vote, but the next lock may
		}
		c.serviceAnswered()
		return outcome{lease: l}
	}
	a.abandon()
	if a.mismatch != nil {
		c.inst.attempt("config", key, a.elapsed)
		c.tried(ctx, a, "config")
		return outcome{err: a.mismatch}
	}
	e := a.failure(ctx)
	if e.Reason == ReasonHeld {
		c.serviceAnswered()
	}
	c.inst.attempt(string(e.Reason), key, a.elapsed)
	c.tried(ctx, a, string(e.Reason))
	return outcome{err: e, wait: e.Wait, took: a.elapsed, unadmitted: a.unadmitted, unverified: a.unverified, handed: a.handed, ahead: a.ahead, cleaned: a.cleaned}
}
