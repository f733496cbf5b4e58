package chaos

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// nemesisWith returns a script that runs a seeded schedule of the given
// kinds of fault until the workers are done.
// Most of the time at most two nodes are impaired (a restarted node counts
// until its quarantine is over), so the lock stays available; now and then
// three nodes restart empty at once, and nothing may be granted until
// their quarantine ends.
func nemesisWith(kinds []weightedKind) func(ctx context.Context, e *env) error {
	return nemesisBeside(kinds, nil)
}

// nemesisBeside is nemesisWith with beside run on a goroutine of its own
// alongside the schedule (nil: nothing), until ctx ends.
func nemesisBeside(kinds []weightedKind, beside func(ctx context.Context, n *nemesisState)) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if err := e.crew.warm(ctx, 1); err != nil {
			return err
		}
		e.log.mark(true)
		n := &nemesisState{e: e, kinds: kinds, start: time.Now(), busy: make([]time.Time, e.cluster.lockN),
			quarantine: quarantineFor(e.sc.TTL)}
		defer n.wg.Wait()
		if beside != nil {
			n.wg.Go(func() { beside(ctx, n) })
		}
		for ctx.Err() == nil {
			if sleep(ctx, time.Duration(150+e.rng.IntN(350))*time.Millisecond) != nil {
				return nil
			}
			n.step(ctx)
		}
		return nil
	}
}

// nemesisKind is a kind of fault the nemesis injects: a value, as the
// faults of the registry are, so that a schedule is a list of them.
type nemesisKind struct {
	name string
	// needsFree is how many unimpaired nodes it needs; with fewer, the
	// step freezes a worker instead.
	needsFree int
	// anyImpaired: it may run however many nodes are impaired already.
	// The others run only while at most one is, so that the lock stays
	// available.
	anyImpaired bool
	// wipes: the nodes it hits lose their data, so it leaves alone the
	// nodes a reconfiguration is moving (nemesisState.protect).
	wipes bool
	// inject starts the fault. node is a random unimpaired node (-1 if
	// none is), free all of them.
	inject func(n *nemesisState, ctx context.Context, node int, free []int)
}

// fits reports whether k may run with these nodes free and impaired.
func (k *nemesisKind) fits(free, impaired int) bool {
	return free >= k.needsFree && (k.anyImpaired || impaired < 2)
}

// weightedKind is a kind in a schedule, with its weight.
type weightedKind struct {
	kind   *nemesisKind
	weight int
}

// The kinds of fault. Each says in its note what it did, with the time,
// so that the history lines up with it.
var (
	kindRestartEmpty = &nemesisKind{name: "restart-empty", needsFree: 1, wipes: true, inject: func(n *nemesisState, ctx context.Context, node int, _ []int) {
		n.holdWipe(node, n.quarantine+300*time.Millisecond)
		n.note("kill -9 node %d, restart empty", node)
		n.wg.Go(func() { n.restart(ctx, node, 0) })
	}}
	kindRestartDown = &nemesisKind{name: "restart-down", needsFree: 1, wipes: true, inject: func(n *nemesisState, ctx context.Context, node int, _ []int) {
		down := n.ms(100, 800)
		n.holdWipe(node, down+n.quarantine+300*time.Millisecond)
		n.note("kill -9 node %d, restart empty after %v", node, down)
		n.wg.Go(func() { n.restart(ctx, node, down) })
	}}
	kindRestart3 = &nemesisKind{name: "restart-3", needsFree: 3, anyImpaired: true, wipes: true, inject: func(n *nemesisState, ctx context.Context, _ int, free []int) {
		nodes := n.three(free)
		n.note("kill -9 nodes %v at once, restart empty (no quorum until their quarantine ends)", nodes)
		for _, i := range nodes {
			n.holdWipe(i, n.quarantine+300*time.Millisecond)
			n.wg.Go(func() { n.restart(ctx, i, 0) })
		}
	}}
	kindFlush3 = &nemesisKind{name: "flush-3", needsFree: 3, anyImpaired: true, wipes: true, inject: func(n *nemesisState, ctx context.Context, _ int, free []int) {
		nodes := n.three(free)
		n.note("FLUSHALL nodes %v at once (their data is gone at once, the processes go on)", nodes)
		for _, i := range nodes {
			n.holdWipe(i, n.quarantine+300*time.Millisecond)
			n.wg.Go(func() { n.flush(ctx, i) })
		}
	}}
	kindRollingRestart = &nemesisKind{name: "rolling-restart", wipes: true, inject: func(n *nemesisState, ctx context.Context, _ int, free []int) {
		n.rolling(ctx, free)
	}}
	kindPause = &nemesisKind{name: "pause", needsFree: 1, inject: func(n *nemesisState, _ context.Context, node int, _ []int) {
		d := n.ms(50, int(n.e.sc.TTL.Milliseconds()*3/2))
		n.hold(node, d+100*time.Millisecond)
		n.note("SIGSTOP node %d for %v", node, d)
		nd := n.e.cluster.nodes[node]
		if err := nd.Pause(); err == nil {
			n.wg.Go(func() { time.Sleep(d); _ = nd.Resume() })
		}
	}}
	kindPartition = &nemesisKind{name: "partition", needsFree: 1, inject: func(n *nemesisState, _ context.Context, node int, _ []int) {
		e := n.e
		d, ws, cut := n.ms(100, int(e.sc.TTL.Milliseconds()*3/2)), n.workers(), e.rng.IntN(2) == 0
		n.hold(node, d+100*time.Millisecond)
		how := "blackhole"
		if cut {
			how = "cut (every connection reset)"
		}
		n.note("partition node %d from workers %v for %v: %s", node, ws, d, how)
		for _, w := range ws {
			p := e.cluster.prox[w][node]
			if cut {
				p.Cut(true)
				n.wg.Go(func() { time.Sleep(d); p.Cut(false) })
			} else {
				p.Blackhole(true)
				n.wg.Go(func() { time.Sleep(d); p.Blackhole(false) })
			}
		}
	}}
	kindSlow = &nemesisKind{name: "slow", needsFree: 1, inject: func(n *nemesisState, _ context.Context, node int, _ []int) {
		e, ttl := n.e, n.e.sc.TTL
		d, lat, ws := n.ms(200, int(ttl.Milliseconds()*3/2)), n.ms(5, int(ttl.Milliseconds()/4)), n.workers()
		n.hold(node, d+100*time.Millisecond)
		n.note("node %d %v slower for workers %v for %v", node, lat, ws, d)
		for _, w := range ws {
			p := e.cluster.prox[w][node]
			p.SetLatency(lat)
			n.wg.Go(func() { time.Sleep(d); p.SetLatency(0) })
		}
	}}
	// kindWorkerFreeze is also what a step does when the kind it drew does
	// not fit the nodes impaired at the time.
	kindWorkerFreeze = &nemesisKind{name: "worker-freeze", anyImpaired: true, inject: func(n *nemesisState, _ context.Context, _ int, _ []int) {
		e, ttl := n.e, n.e.sc.TTL
		w := e.rng.IntN(e.sc.Workers)
		d := ttl + n.ms(0, int(ttl.Milliseconds()))
		n.note("SIGSTOP worker %d for %v", w, d)
		p := e.crew.procs[w]
		if err := p.freeze(); err == nil {
			n.wg.Go(func() { time.Sleep(d); _ = p.thaw() })
		}
	}}
)

// nemesisKinds are the nemesis's faults and their weights.
var nemesisKinds = []weightedKind{
	{kindRestartEmpty, 3}, {kindRestartDown, 1}, {kindRollingRestart, 1}, {kindRestart3, 2}, {kindFlush3, 1},
	{kindPause, 2}, {kindPartition, 2}, {kindSlow, 2}, {kindWorkerFreeze, 1},
}

// restartHeavy is the no-quarantine twin's mix: mostly three nodes losing
// their data at once, each a chance to grant a lease the nodes forgot, so
// that a short run shows the double grants at any load. Most of those are
// flushes: a FLUSHALL takes effect at once, while a restart takes 0.1-0.4 s
// (over a second on a loaded machine, past the 1 s leases the nodes forgot,
// when the twin found no double grant in one of ten quick profiles).
var restartHeavy = []weightedKind{
	{kindRestartEmpty, 1}, {kindRestart3, 3}, {kindFlush3, 8}, {kindPause, 1}, {kindPartition, 1}, {kindSlow, 1}, {kindWorkerFreeze, 1},
}

// nemesisState is the state of one nemesis schedule.
type nemesisState struct {
	e          *env
	kinds      []weightedKind
	start      time.Time
	quarantine time.Duration
	wg         sync.WaitGroup

	mu   sync.Mutex
	busy []time.Time // per node: impaired until
	// protected are the nodes a reconfiguration is moving: no fault
	// that wipes a node hits them until it is done.
	protected []int
	wiping    []time.Time // per node: a fault that wipes it lasts until
}

// protect keeps the faults that wipe a node off nodes (nil: none) until
// the next call.
func (n *nemesisState) protect(nodes []int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.protected = slices.Clone(nodes)
}

// isProtected reports whether node i is protected now.
func (n *nemesisState) isProtected(i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.protected, i)
}

// step injects one fault, drawn by the seeded generator.
func (n *nemesisState) step(ctx context.Context) {
	e := n.e
	free := n.free()
	kind := n.pick()
	if kind.wipes {
		free = slices.DeleteFunc(free, n.isProtected)
	}
	if !kind.fits(len(free), e.cluster.lockN-len(free)) {
		kind = kindWorkerFreeze
	}
	node := -1
	if len(free) > 0 {
		node = free[e.rng.IntN(len(free))]
	}
	e.log.count(kind.name)
	kind.inject(n, ctx, node, free)
}

// pick draws a kind by weight.
func (n *nemesisState) pick() *nemesisKind {
	total := 0
	for _, k := range n.kinds {
		total += k.weight
	}
	r := n.e.rng.IntN(total)
	for _, k := range n.kinds {
		if r < k.weight {
			return k.kind
		}
		r -= k.weight
	}
	return n.kinds[0].kind
}

// note logs one step with its time since the schedule began and its
// stamp in ms (stampNs), to line it up with the history's times.
func (n *nemesisState) note(format string, args ...any) {
	n.e.log.note("t=%.2fs @%d "+format, append([]any{time.Since(n.start).Seconds(), stampNs() / 1e6}, args...)...)
}

// free returns the nodes not impaired now.
func (n *nemesisState) free() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	var out []int
	for i, until := range n.busy {
		if !until.After(now) {
			out = append(out, i)
		}
	}
	return out
}

func (n *nemesisState) hold(node int, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.busy[node] = time.Now().Add(d)
}

// holdWipe is hold for a fault that wipes node: until it is over, a
// reconfiguration does not start on the node (wiped reports it).
func (n *nemesisState) holdWipe(node int, d time.Duration) {
	n.hold(node, d)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wiping == nil {
		n.wiping = make([]time.Time, len(n.busy))
	}
	n.wiping[node] = time.Now().Add(d)
}

// wiped reports whether a fault that wipes one of nodes may still be
// under way (a restart not over yet).
func (n *nemesisState) wiped(nodes []int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	for _, i := range nodes {
		if n.wiping != nil && n.wiping[i].After(now) {
			return true
		}
	}
	return false
}

func (n *nemesisState) ms(lo, hi int) time.Duration {
	return time.Duration(lo+n.e.rng.IntN(hi-lo+1)) * time.Millisecond
}

// workers returns a random non-empty subset of the workers.
func (n *nemesisState) workers() []int {
	var ws []int
	for len(ws) == 0 {
		for w := range n.e.sc.Workers {
			if n.e.rng.IntN(2) == 0 {
				ws = append(ws, w)
			}
		}
	}
	return ws
}

// restart kills node i with SIGKILL and starts it again without its data,
// after down (0: at once); it tries twice.
func (n *nemesisState) restart(ctx context.Context, i int, down time.Duration) {
	node := n.e.cluster.nodes[i]
	if down > 0 {
		_ = node.Kill()
		_ = sleep(ctx, down)
	}
	for try := 0; try < 2; try++ {
		t0 := time.Now()
		err := node.Restart(context.WithoutCancel(ctx))
		if err == nil {
			n.note("node %d answers again, empty (restart took %v)", i, time.Since(t0).Round(time.Millisecond))
			return
		}
		n.note("node %d did not restart: %v", i, err)
		n.e.log.count("restart-failed")
		time.Sleep(200 * time.Millisecond)
	}
}

// three draws three of the free nodes (the caller checked there are).
func (n *nemesisState) three(free []int) []int {
	nodes := slices.Clone(free)
	n.e.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return nodes[:3]
}

// flush empties node i with FLUSHALL: data lost as in a restart without
// persistence, at once, with no process start in between.
func (n *nemesisState) flush(ctx context.Context, i int) {
	rc := redis.NewClient(&redis.Options{Addr: n.e.cluster.nodes[i].Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rc.Close()
	if err := rc.FlushAll(context.WithoutCancel(ctx)).Err(); err != nil {
		n.note("node %d not flushed: %v", i, err)
		n.e.log.count("flush-failed")
	}
}

// rolling restarts two to five nodes empty, one after another, each once
// the one before has served its quarantine. While it runs, one worker
// may be cut off from the node restarted last, so that the clients that
// re-admit the others cannot reach it.
func (n *nemesisState) rolling(ctx context.Context, free []int) {
	e := n.e
	order := make([]int, e.cluster.lockN)
	for i := range order {
		order[i] = i
	}
	e.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	order = order[:2+e.rng.IntN(len(order)-1)]
	order = slices.DeleteFunc(order, n.isProtected)
	if len(order) == 0 {
		return
	}
	last := order[len(order)-1]
	cutOff := -1
	if len(free) == e.cluster.lockN && e.rng.IntN(2) == 0 {
		cutOff = e.rng.IntN(e.sc.Workers)
	}
	n.note("rolling restart of nodes %v, each empty; worker %d cut off from node %d meanwhile (-1: none)", order, cutOff, last)
	if cutOff >= 0 {
		p := e.cluster.prox[cutOff][last]
		p.Blackhole(true)
		defer p.Blackhole(false)
	}
	for _, i := range order {
		for !slices.Contains(n.free(), i) || n.isProtected(i) {
			if sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
		}
		if i == last && cutOff >= 0 {
			p := e.cluster.prox[cutOff][last]
			p.Blackhole(false)
		}
		n.holdWipe(i, n.quarantine+300*time.Millisecond)
		n.restart(ctx, i, 0)
		if sleep(ctx, n.quarantine+n.ms(100, 300)) != nil {
			return
		}
	}
}
