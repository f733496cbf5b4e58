package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// The nemesis with reconfiguration: clients of two settings, S (the five
// nodes, max ttl nemesisTTL) and T (nodes 0-3, max ttl reconfigMaxTTL),
// while the operator moves the deployment from S to T and back, again and
// again, with Client.Reconfigure. Half the runs are cut short at a random
// moment (a crash, Ctrl-C) and run again; some runs read the old settings
// from the nodes, some are typed, and now and then an operator types the
// wrong old max ttl first, which must be refused. The node faults of the
// nemesis go on throughout; those that wipe a node leave alone the nodes a
// change is moving until it is done (a new node wiped between the steps
// gets a new identity, and its change can no longer be rerun: see
// docs/chaos.md). Judged: no overlap, no token inversion, no lost update,
// every change finished, the wrong runs refused, and each side's clients
// granted while the deployment ran with their settings.

// reconfigMaxTTL is the T side's max ttl.
const reconfigMaxTTL = 1200 * time.Millisecond

// reconfigTNodes are the T side's nodes: node 4 leaves.
var reconfigTNodes = []int{0, 1, 2, 3}

func init() {
	s := newRun(Redlock5, "claim-first", len(reconfigClients), 1, Expect{Overlaps: Zero, Lost: Zero, Granted: true})
	s.Duration, s.TTL = time.Minute, nemesisTTL
	register(&fault{
		name: "nemesis-reconfig",
		rank: 205,
		doc: "the nemesis with clients of two settings (five nodes, max ttl 1s; four nodes, max ttl 1.2s) while the deployment " +
			"is reconfigured from one to the other and back, runs cut short at random and rerun, wrong old settings typed now and then",
		topologies: []string{Redlock5},
		runs:       map[string][]Scenario{"soak": {s}},
		worker: func(w int, cfg *workerConfig) {
			ttl := time.Duration(cfg.TTLms) * time.Millisecond
			cfg.StallRate, cfg.StallMin, cfg.StallMax = 0.02, cfg.TTLms, cfg.TTLms*3/2
			cfg.PauseMs = 100
			reconfigClients[w%len(reconfigClients)].apply(ttl, cfg)
		},
		script: nemesisBeside(nemesisKinds, reconfigure),
		judge:  judgeNemesisReconfig,
	})
}

// toT makes a worker a client of the T side.
func toT(c *workerConfig) {
	c.Nodes, c.Dial = c.Nodes[:len(reconfigTNodes)], c.Dial[:len(reconfigTNodes)]
	c.MaxTTLms = int(reconfigMaxTTL.Milliseconds())
}

// reconfigClients are the workers of nemesis-reconfig, by index: the
// same styles on both sides.
var reconfigClients = []nemesisClient{
	{name: "S lock", apply: func(ttl time.Duration, c *workerConfig) {
		c.WorkMs = int(ttl.Milliseconds() / 20)
	}},
	{name: "T lock", changed: true, apply: func(ttl time.Duration, c *workerConfig) {
		toT(c)
		c.WorkMs = int(ttl.Milliseconds() / 20)
	}},
	{name: "S do-extend localhost", apply: func(ttl time.Duration, c *workerConfig) {
		c.Style, c.WorkMs = styleDoExtend, int(ttl.Milliseconds()*2/5)
		renameNodes(c, func(_ int, port string) string { return "localhost:" + port })
	}},
	{name: "T do-extend reversed", changed: true, apply: func(ttl time.Duration, c *workerConfig) {
		toT(c)
		c.Style, c.WorkMs = styleDoExtend, int(ttl.Milliseconds()*2/5)
		reorderNodes(c, func(n int) []int { o := seq(0, n); slices.Reverse(o); return o })
	}},
	{name: "S do-panic tcp4", apply: func(ttl time.Duration, c *workerConfig) {
		c.Style, c.WorkMs, c.Network = styleDoPanic, int(ttl.Milliseconds()/10), "tcp4"
	}},
	{name: "T bootstrap at every start", changed: true, apply: func(ttl time.Duration, c *workerConfig) {
		toT(c)
		c.Bootstrap, c.WorkMs = true, int(ttl.Milliseconds()/20)
	}},
	{name: "S unfenced do-extend", apply: func(ttl time.Duration, c *workerConfig) {
		c.Fencing, c.Row, c.Style = "none", 2, styleDoExtend
		c.WorkMs = int(ttl.Milliseconds() / 5)
	}},
	{name: "T unfenced lock", changed: true, apply: func(ttl time.Duration, c *workerConfig) {
		toT(c)
		c.Fencing, c.Row = "none", 2
		c.WorkMs = int(ttl.Milliseconds() / 20)
	}},
}

// reconfigSide is one side's nodes and max ttl.
type reconfigSide struct {
	name   string
	nodes  []int
	maxTTL time.Duration
}

// reconfigure moves the deployment from S to T and back until ctx ends,
// one change every 6 to 12 s, each run until it is done.
func reconfigure(ctx context.Context, n *nemesisState) {
	e := n.e
	rng := rand.New(rand.NewPCG(e.seed, 0x5eed0f5e77))
	sides := [2]reconfigSide{{"S", seq(0, e.cluster.lockN), e.sc.TTL}, {"T", reconfigTNodes, reconfigMaxTTL}}
	at := 0
	for {
		if sleep(ctx, time.Duration(6000+rng.IntN(6000))*time.Millisecond) != nil {
			return
		}
		from, to := sides[at], sides[1-at]
		if !n.change(ctx, rng, from, to) {
			return
		}
		at = 1 - at
	}
}

// change runs Reconfigure from one side to the other until it returns
// nil, and reports whether it did (false: ctx ended, or it was stuck).
func (n *nemesisState) change(ctx context.Context, rng *rand.Rand, from, to reconfigSide) bool {
	e := n.e
	cs := e.cluster.directClients()
	defer closeAll(cs)
	pick := func(idx []int) []redis.UniversalClient {
		out := make([]redis.UniversalClient, len(idx))
		for k, i := range idx {
			out[k] = cs[i]
		}
		return out
	}
	// Nodes that left in an earlier change are retired: an operator
	// empties them before listing them again.
	for _, i := range to.nodes {
		if !slices.Contains(from.nodes, i) {
			n.flush(ctx, i)
			n.note("reconfigure %s->%s: FLUSHALL node %d, retired by an earlier change, before it joins", from.name, to.name, i)
		}
	}
	n.protect(to.nodes)
	defer n.protect(nil)
	// A wipe already under way (a restart not over yet) lands before the
	// change starts, not between its steps.
	for n.wiped(to.nodes) {
		if sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
	holdOff := max(quarantineFor(from.maxTTL), quarantineFor(to.maxTTL))
	e.log.count("reconfigure-" + to.name)
	start := time.Now()
	for run := 1; run <= 40 && ctx.Err() == nil; run++ {
		lc, err := redlock.New(pick(to.nodes), redlock.WithMaxTTL(to.maxTTL))
		if err != nil {
			n.note("reconfigure %s->%s: New: %v", from.name, to.name, err)
			if sleep(ctx, 200*time.Millisecond) != nil {
				return false
			}
			continue
		}
		ok := n.reconfigureRun(ctx, rng, lc, pick(from.nodes), pick(to.nodes), from, to, holdOff, run)
		_ = lc.Close()
		if ok {
			e.log.count("reconfigure-done-" + to.name)
			n.note("reconfigure %s->%s: done after %d runs in %v", from.name, to.name, run, time.Since(start).Round(time.Millisecond))
			return true
		}
		if sleep(ctx, time.Duration(rng.IntN(1000))*time.Millisecond) != nil {
			return false
		}
	}
	if ctx.Err() == nil {
		e.log.count("reconfigure-stuck")
		n.note("reconfigure %s->%s: not done after 40 runs: no more changes in this run", from.name, to.name)
	}
	return false
}

// reconfigureRun is one run of the command, perhaps cut short, perhaps
// after a slip; it reports whether the change is done.
func (n *nemesisState) reconfigureRun(ctx context.Context, rng *rand.Rand, lc *redlock.Client, olds, news []redis.UniversalClient,
	from, to reconfigSide, holdOff time.Duration, run int) bool {
	e := n.e
	typed := []redlock.Option{redlock.WithMaxTTL(from.maxTTL)}
	if rng.IntN(6) == 0 {
		// The slip: a wrong old max ttl, before the right run. Where no
		// new node carries a marker (every one lost its data), nothing
		// records the old settings to check it against: the run is then
		// no worse than a client of the new settings meeting those nodes
		// by itself (the residual case of docs/protocol.md's Theorem 4),
		// and is counted apart.
		unmarked := bare(ctx, news)
		err := lc.Reconfigure(ctx, olds, redlock.WithMaxTTL(from.maxTTL+500*time.Millisecond))
		switch {
		case err == nil && unmarked:
			e.log.count("reconfigure-slip-on-bare-nodes")
			n.note("reconfigure %s->%s run %d: a run with a wrong old max ttl returned nil; no new node carried a marker", from.name, to.name, run)
			return true
		case err == nil:
			e.log.count("reconfigure-slip-taken")
			n.note("reconfigure %s->%s run %d: a run with a wrong old max ttl returned nil", from.name, to.name, run)
			return true
		case errors.Is(err, redlock.ErrReconfigureIncomplete):
			e.log.count("reconfigure-slip-incomplete")
		default:
			e.log.count("reconfigure-slip-refused")
		}
	}
	rctx, cancel := ctx, context.CancelFunc(func() {})
	cut := time.Duration(0)
	if rng.IntN(2) == 0 {
		cut = time.Duration(rng.Int64N(int64(holdOff + 400*time.Millisecond)))
		rctx, cancel = context.WithTimeout(ctx, cut)
	}
	defer cancel()
	how := "old settings read from the nodes"
	var opts []redlock.Option
	if rng.IntN(2) == 0 {
		how, opts = "old settings typed", typed
	}
	err := lc.Reconfigure(rctx, olds, opts...)
	switch {
	case err == nil:
		return true
	case cut > 0 && rctx.Err() != nil && ctx.Err() == nil:
		e.log.count("reconfigure-cut")
		n.note("reconfigure %s->%s run %d (%s): cut short after %v", from.name, to.name, run, how, cut.Round(time.Millisecond))
	case errors.Is(err, redlock.ErrReconfigureIncomplete):
		e.log.count("reconfigure-incomplete")
		n.note("reconfigure %s->%s run %d (%s): incomplete: %s", from.name, to.name, run, how, oneLine(err))
	default:
		e.log.count("reconfigure-refused")
		n.note("reconfigure %s->%s run %d (%s): refused: %s", from.name, to.name, run, how, oneLine(err))
	}
	return false
}

// adminMarker is the node key that holds a node's admission marker
// (docs/protocol.md, "Admission marker").
const adminMarker = "quorumlock:admitted"

// bare reports whether none of nodes carries an admission marker: each
// is new, or lost its data (a quarantine in progress writes none).
func bare(ctx context.Context, nodes []redis.UniversalClient) bool {
	for _, c := range nodes {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Get(gctx, adminMarker).Err()
		cancel()
		if !errors.Is(err, redis.Nil) {
			return false
		}
	}
	return true
}

// judgeNemesisReconfig checks what the expectations cannot say: the
// safety measures beyond overlaps and lost updates; that every change
// finished and no wrong run was taken; and that each side's clients got
// leases while the deployment ran with their settings and were refused
// while it did not.
func judgeNemesisReconfig(e *env, r *Result, h *history, stats []*workerStats) []string {
	bad := safetyVerdicts(r)
	c := r.FaultCounts
	if c["reconfigure-stuck"] > 0 {
		bad = append(bad, "a change was not done after 40 runs (see the schedule)")
	}
	if c["reconfigure-slip-taken"] > 0 {
		bad = append(bad, fmt.Sprintf("%d runs with a wrong old max ttl returned nil", c["reconfigure-slip-taken"]))
	}
	toT := c["reconfigure-done-T"]
	if toT == 0 {
		bad = append(bad, "no change to T was done in the run")
	}
	return append(bad, judgeWorkers(e, r, h, stats, reconfigClients, func(w int, c nemesisClient, st *workerStats, nw NemesisWorker) string {
		switch {
		case nw.Granted == 0 && (!c.changed || toT > 0):
			return fmt.Sprintf("worker %d (%s) never got the lock (last error: %s)", w, c.name, st.LastError)
		case nw.Refusals == 0 && (c.changed || toT > 0):
			return fmt.Sprintf("worker %d (%s) was never refused, though the deployment ran with the other settings (last error: %s)", w, c.name, st.LastError)
		}
		return ""
	})...)
}
