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

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// How an attempt reads its round's replies: which count as votes, whether
// the round must hear more nodes out, what each node said, and the error of
// an attempt that failed.

// votes reports whether r is a grant that counts: from the server its
// node was verified on, as the round read the proven ids (see
// identity.go).
func (a *attempt) votes(r quorum.Reply[script.AcquireReply]) bool {
	return acquired(r) && script.SameServer(a.proven[r.Node], r.Val.Ident)
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
	var reply driver.Error
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

// nodeAnswers names each node's answer to the attempt: granted, held,
// queued, handed, quarantined, mismatch, unverified, error, or none (not
// heard from before the decision).
func (a *attempt) nodeAnswers() []string {
	out := make([]string, len(a.c.nodes))
	for i := range out {
		out[i] = "none"
	}
	for _, r := range a.replies {
		var s string
		switch {
		case r.Err != nil:
			s = "error"
		case r.Val.Status == script.Unadmitted && a.proven[r.Node] != "":
			s = "quarantined" // as tally: lost its data, its id with it
		case !script.SameServer(a.proven[r.Node], r.Val.Ident):
			s = "unverified"
		default:
			switch r.Val.Status {
			case script.Granted:
				s = "granted"
			case script.Held, script.Ahead:
				s = "held"
			case script.Queued:
				s = "queued"
			case script.HandedHere:
				s = "handed"
			case script.Unadmitted:
				s = "quarantined"
			case script.Mismatch:
				s = "mismatch"
			default:
				s = "error"
			}
		}
		out[r.Node] = s
	}
	return out
}
