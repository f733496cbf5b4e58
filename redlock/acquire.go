package redlock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/quorum"
)

// acqReply is one node's answer to the acquire script.
type acqReply struct {
	status int64  // 1 ours, 0 held by another value, -1 not admitted
	pttl   int64  // with status 0: the other holder's remaining ms (-1: no expiry)
	fence  uint64 // with fencing: the node's fence value for the key
	timeUs uint64 // with fencing: the node's clock, microseconds since the epoch
}

func acquired(r quorum.Reply[acqReply]) bool { return r.Err == nil && r.Val.status == 1 }

// acqArgs are one attempt's script keys and arguments, built once and
// shared read-only by the attempt's per-node calls.
type acqArgs struct {
	keys []string
	args []any
}

func (c *Client) newAcqArgs(key, value string, ttlMs int64) acqArgs {
	check, fence, fkey := "0", "0", key // KEYS[2] is only read with fencing
	if c.cfg.quarantine {
		check = "1"
	}
	if c.cfg.fencing {
		fence, fkey = "1", fenceKey(key)
	}
	return acqArgs{keys: []string{key, fkey, markerKey}, args: []any{value, ttlMs, check, fence}}
}

func (c *Client) acquireOn(ctx context.Context, i int, a acqArgs) (acqReply, error) {
	res, err := acquireScript.Run(ctx, c.nodes[i].sc, a.keys, a.args...).Slice()
	c.observe(i, err)
	if err != nil {
		return acqReply{}, err
	}
	return parseAcquire(res)
}

func parseAcquire(res []any) (acqReply, error) {
	var r acqReply
	if len(res) < 2 {
		return r, fmt.Errorf("acquire script returned %d values", len(res))
	}
	st, ok1 := res[0].(int64)
	pt, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return r, fmt.Errorf("acquire script returned %T, %T", res[0], res[1])
	}
	r.status, r.pttl = st, pt
	if len(res) >= 5 {
		fs, _ := res[2].(string)
		f, err := strconv.ParseUint(fs, 10, 64)
		if err != nil {
			return r, fmt.Errorf("fence value %q: %w", fs, err)
		}
		sec, _ := res[3].(int64)
		us, _ := res[4].(int64)
		r.fence, r.timeUs = f, uint64(sec)*1_000_000+uint64(us)
	}
	return r, nil
}

// attempt is the outcome of one acquisition round.
type attempt struct {
	lease      *Lease
	err        error         // wraps ErrNotObtained on failure
	wait       time.Duration // with err: how long until enough busy nodes expire (0: unknown)
	took       time.Duration // with err: how long the failed round took
	unadmitted []int         // nodes that refused to vote because they are not admitted
}

// try runs one acquisition round (plus the fencing commit round when
// enabled). On any failure it releases the key on every node before
// returning (nodes that do not answer are released in the background).
//
// With ordered set (Lock's retries under contention), the round first asks
// one gatekeeper node alone and goes on to the others only if it granted:
// contenders that all wake on the same release then queue on one node
// instead of splitting the majority between them, and the losers leave
// nothing to clean up. The validity still counts from before the first
// step, so safety is that of the parallel round; it costs one more round
// trip to the winner.
func (c *Client) try(ctx context.Context, key string, ttl time.Duration, ordered bool) attempt {
	value := newValue()
	ttlMs := ttl.Milliseconds()
	n := len(c.nodes)
	t0 := c.cfg.clock.Now()
	aa := c.newAcqArgs(key, value, ttlMs)

	gate, gateReply := -1, acqReply{}
	if ordered && n >= 3 {
		if g := c.gatekeeper(key); g >= 0 {
			gctx, gcancel := context.WithTimeout(ctx, c.nodeTimeout(ttl))
			r, err := c.acquireOn(gctx, g, aa)
			gcancel()
			switch {
			case err == nil && r.status == 0:
				// Held elsewhere (or by a contender that got here first):
				// nothing was taken, nothing to clean up.
				c.inst.attempt("held", c.cfg.clock.Now().Sub(t0))
				return attempt{
					err:  errors.Join(ErrNotObtained, fmt.Errorf("held elsewhere: gatekeeper node %d is taken", g), c.nodeErr(g, ErrNodeHeld)),
					wait: freeIn([]int64{r.pttl}, 1, 1),
					took: c.cfg.clock.Now().Sub(t0),
				}
			case err == nil && r.status == 1:
				gate, gateReply = g, r
			}
			// Otherwise (error, not admitted): fall back to the plain round,
			// which releases on every node, this one included.
		}
	}

	rctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(ttl))
	defer cancel()
	round := quorum.Start(rctx, n, func(ctx context.Context, i int) (acqReply, error) {
		if i == gate {
			return gateReply, nil
		}
		return c.acquireOn(ctx, i, aa)
	})
	replies := round.AwaitDiscounting(rctx, c.quorum, acquired, c.missedLast)
	elapsed := c.cfg.clock.Now().Sub(t0)

	var yes int
	var errs []error
	var unadmitted []int
	busy := make([]int64, 0, n)
	for _, r := range replies {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, r.Err))
		case r.Val.status == 1:
			yes++
			c.admit.saw(r.Node)
		case r.Val.status == 0:
			c.admit.saw(r.Node)
			errs = append(errs, c.nodeErr(r.Node, ErrNodeHeld))
			busy = append(busy, r.Val.pttl)
		default:
			c.admit.lost(r.Node)
			unadmitted = append(unadmitted, r.Node)
			errs = append(errs, c.nodeErr(r.Node, ErrNodeQuarantined))
		}
	}
	// Nodes not heard from are an error only if the round ran out of time;
	// a round decided early simply did not wait for them.
	if len(replies) < n && yes < c.quorum {
		timedOut := rctx.Err() != nil && ctx.Err() == nil
		for _, i := range missing(n, replies) {
			switch {
			case timedOut:
				c.nodes[i].missed.Store(true)
				errs = append(errs, c.nodeErr(i, fmt.Errorf("no reply within %v: %w", c.nodeTimeout(ttl), context.DeadlineExceeded)))
			case c.missedLast(i):
				errs = append(errs, c.nodeErr(i, errors.New("not waited for: it missed its previous deadline and success needed it")))
			default:
				// Success had become impossible; it was not needed.
			}
		}
	}

	validity := drift.Validity(ttl, elapsed, c.cfg.factor)
	var token uint64
	fenceFailed := false
	if yes >= c.quorum && validity > 0 && ctx.Err() == nil && c.cfg.fencing {
		var err error
		token, err = c.commit(ctx, key, value, ttl, replies)
		validity = drift.Validity(ttl, c.cfg.clock.Now().Sub(t0), c.cfg.factor)
		if err != nil {
			errs = append(errs, err)
			yes, fenceFailed = 0, true // the token is unusable without a quorum of commits
		}
	}

	if yes >= c.quorum && validity > 0 && ctx.Err() == nil {
		c.inst.attempt("obtained", c.cfg.clock.Now().Sub(t0))
		for _, i := range unadmitted {
			c.admit.kick(i) // start its admission; the lock did not need it
		}
		l := c.newLease(key, value, ttl, token, t0.Add(ttl-drift.Drift(ttl, c.cfg.factor)))
		c.spawn(func() {
			// Stragglers that took the key after we decided are part of
			// the lock; if the lease is already over, release them now.
			for _, r := range round.Wait() {
				if acquired(r) && l.straggler(r.Node) {
					c.releaseOne(key, value, r.Node, ttl)
				}
			}
		})
		return attempt{lease: l}
	}

	round.Cancel()
	c.cleanup(key, value, ttl, replies, round)

	var cause error
	var outcome string
	switch {
	case ctx.Err() != nil:
		cause, outcome = ctx.Err(), "cancelled"
	case yes >= c.quorum:
		cause, outcome = fmt.Errorf("validity used up: the round took %v of a %v ttl", elapsed, ttl), "validity"
	case fenceFailed:
		cause, outcome = errors.New("fencing commit failed"), "fence_commit"
	case len(busy) > 0:
		cause, outcome = fmt.Errorf("held elsewhere: %d of %d nodes granted, %d needed", yes, n, c.quorum), "held"
	default:
		cause, outcome = fmt.Errorf("no quorum: %d of %d nodes granted, %d needed", yes, n, c.quorum), "no_quorum"
	}
	c.inst.attempt(outcome, c.cfg.clock.Now().Sub(t0))
	return attempt{
		err:        errors.Join(append([]error{ErrNotObtained, cause}, errs...)...),
		wait:       freeIn(busy, c.quorum, n),
		took:       elapsed,
		unadmitted: unadmitted,
	}
}

// gatekeeper picks the node ordered attempts on key start with: the same
// for every client that sees the same nodes healthy (a hash of the key),
// skipping nodes that missed their last deadline. -1 if none qualifies.
func (c *Client) gatekeeper(key string) int {
	n := len(c.nodes)
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	start := int(h.Sum32() % uint32(n))
	for k := range n {
		if i := (start + k) % n; !c.missedLast(i) {
			return i
		}
	}
	return -1
}

// missedLast reports whether node i missed the deadline of its last call.
func (c *Client) missedLast(i int) bool { return c.nodes[i].missed.Load() }

// missing lists the nodes that have no reply in replies.
func missing(n int, replies []quorum.Reply[acqReply]) []int {
	got := make([]bool, n)
	for _, r := range replies {
		got[r.Node] = true
	}
	var out []int
	for i, ok := range got {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// freeIn estimates when a quorum of nodes could be free of the other
// holder's key, from the remaining ttls that busy nodes reported: nodes
// that did not report busy count as free now. 0 means unknown.
func freeIn(busy []int64, q, n int) time.Duration {
	free := n - len(busy)
	if len(busy) == 0 || free >= q {
		return 0
	}
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

// commit is the fencing round of DESIGN.md §3: token = max(1 + the largest
// fence read, the largest server time in µs), raised on every node where
// our key still holds our value; usable only with a quorum of commits.
func (c *Client) commit(ctx context.Context, key, value string, ttl time.Duration, replies []quorum.Reply[acqReply]) (uint64, error) {
	var maxFence, floor uint64
	for _, r := range replies {
		if r.Err == nil && r.Val.status >= 0 {
			maxFence = max(maxFence, r.Val.fence)
			floor = max(floor, r.Val.timeUs)
		}
	}
	if maxFence >= math.MaxInt64 || floor > math.MaxInt64 {
		return 0, fmt.Errorf("redlock: fence for %q would pass the largest PostgreSQL bigint (fence %d, server time %d µs)", key, maxFence, floor)
	}
	token := max(maxFence+1, floor)
	tok := strconv.FormatUint(token, 10)

	rctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(ttl))
	defer cancel()
	keys, args := []string{key, fenceKey(key)}, []any{value, tok}
	round := quorum.Start(rctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		v, err := commitScript.Run(ctx, c.nodes[i].sc, keys, args...).Int64()
		c.observe(i, err)
		return v == 1, err
	})
	ok := func(r quorum.Reply[bool]) bool { return r.Err == nil && r.Val }
	got := round.Await(rctx, c.quorum, ok)
	c.spawn(func() { round.Wait() })
	var yes int
	var errs []error
	for _, r := range got {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("fence commit: %w", r.Err)))
		case r.Val:
			yes++
		default:
			errs = append(errs, c.nodeErr(r.Node, errors.New("fence commit: key no longer ours")))
		}
	}
	if yes < c.quorum {
		return 0, errors.Join(append([]error{fmt.Errorf("fence commit reached %d of %d nodes, %d needed", yes, len(c.nodes), c.quorum)}, errs...)...)
	}
	return token, nil
}
