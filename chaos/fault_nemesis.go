package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The nemesis is the randomized multi-client test of issue 11: lock
// clients that differ the ways a real fleet's do, under a seeded schedule
// of the node faults the lock must survive, checked for what must never
// happen. docs/chaos.md describes it; `make soak` runs it for hours.

func init() {
	register(&fault{
		name: "nemesis",
		rank: 200,
		doc: "clients that differ the ways real fleets do (node names, order and network, fencing on and off, Do with Extend, " +
			"panics in fn, misconfigured max ttl and drift) under a seeded schedule of empty and rolling restarts, pauses, " +
			"partitions, slow links and worker freezes",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"soak": {nemesisRun(time.Minute)},
		},
		worker: nemesisWorker,
		script: nemesisWith(nemesisKinds),
		judge:  judgeNemesis,
	})
	// The same with the restart quarantine off in every client: what the
	// nemesis finds when the lock is broken, so that its zeros mean
	// something. Without the quarantine the nodes do not check the
	// clients' settings either, so the misconfigured clients are granted
	// too; the judge leaves the clients alone here.
	noQ := nemesisRun(45 * time.Second)
	noQ.Expect = Expect{Overlaps: Positive}
	register(&fault{
		name:         "nemesis-no-quarantine",
		rank:         210,
		doc:          "as nemesis, with the clients' restart quarantine off: nodes restarted empty grant locks they forgot",
		topologies:   []string{Redlock5},
		noQuarantine: true,
		runs:         map[string][]Scenario{"quick": {noQ}},
		worker:       nemesisWorker,
		script:       nemesisWith(restartHeavy),
		judge:        judgeNemesis,
	})
}

// nemesisRun is a nemesis run of duration d. The fenced clients share
// counter row 1 under claim-first, so none of their updates may be lost.
func nemesisRun(d time.Duration) Scenario {
	s := newRun(Redlock5, "claim-first", len(nemesisClients), 1, Expect{Overlaps: Zero, Lost: Zero, Granted: true})
	// A ttl well above the time a node takes to restart (0.1-0.4 s on a
	// loaded machine here): with 200 ms every lease a restart could make
	// a node forget has expired before the node answers again, and the
	// nemesis would find nothing even without the quarantine.
	s.Duration, s.TTL = d, nemesisTTL
	return s
}

// nemesisTTL is the nemesis's lease ttl, and the deployment's max ttl.
const nemesisTTL = time.Second

// nemesisClient is one worker's lock client in a nemesis run.
type nemesisClient struct {
	name string
	// refused: its settings disagree with the deployment's, so every
	// lock call it makes must fail with a *redlock.ConfigError.
	refused bool
	// polls: the client polls TryLock, which does not queue on the nodes,
	// so under steady contention from Lock's waiters (who do, and are
	// served first) it may never win; its grants are reported, not
	// required.
	polls bool
	// aliased: its node list names one server twice; it may be granted
	// leases (its four distinct servers are the deployment's) until the
	// second name answers, and from then on must be refused.
	aliased bool
	apply   func(ttl time.Duration, cfg *workerConfig)
}

// nemesisClients are the nemesis's workers, by index. The well-configured
// ones name and order the same five nodes differently (each worker's
// addresses are only names: it dials its own proxies whatever it calls
// them); the misconfigured ones are built with another max ttl or drift
// factor than the deployment was admitted with.
var nemesisClients = []nemesisClient{
	{name: "lock ip", apply: func(ttl time.Duration, c *workerConfig) {
		c.WorkMs = int(ttl.Milliseconds() / 20)
	}},
	{name: "do-extend localhost", apply: func(ttl time.Duration, c *workerConfig) {
		c.Style, c.WorkMs = styleDoExtend, int(ttl.Milliseconds()*2/5)
		renameNodes(c, func(_ int, port string) string { return "localhost:" + port })
	}},
	{name: "do-panic tcp4 reversed", apply: func(ttl time.Duration, c *workerConfig) {
		c.Style, c.WorkMs = styleDoPanic, int(ttl.Milliseconds()/10)
		c.Network = "tcp4"
		reorderNodes(c, func(n int) []int { o := seq(0, n); slices.Reverse(o); return o })
	}},
	{name: "trylock hostnames rotated", polls: true, apply: func(ttl time.Duration, c *workerConfig) {
		c.PollMs, c.WorkMs = 20, int(ttl.Milliseconds()/50)
		renameNodes(c, func(i int, port string) string { return fmt.Sprintf("redis-%d.fleet.internal:%s", i, port) })
		reorderNodes(c, func(n int) []int { return append(seq(2, n), seq(0, 2)...) })
	}},
	{name: "unfenced do-extend", apply: func(ttl time.Duration, c *workerConfig) {
		c.Fencing, c.Row, c.Style = "none", 2, styleDoExtend
		c.WorkMs = int(ttl.Milliseconds() / 5)
		renameNodes(c, func(_ int, port string) string { return "localhost:" + port })
	}},
	{name: "max-ttl x2", refused: true, apply: func(ttl time.Duration, c *workerConfig) {
		c.MaxTTLms, c.PauseMs = int(2*ttl.Milliseconds()), 100
	}},
	{name: "max-ttl /2 unfenced", refused: true, apply: func(ttl time.Duration, c *workerConfig) {
		c.Fencing, c.Row = "none", 2
		c.MaxTTLms, c.TTLms, c.PauseMs = int(ttl.Milliseconds()/2), int(ttl.Milliseconds()/2), 100
	}},
	{name: "drift 0.02", refused: true, apply: func(_ time.Duration, c *workerConfig) {
		c.Drift, c.PauseMs = 0.02, 100
	}},
	{name: "bootstrap at every start", apply: func(ttl time.Duration, c *workerConfig) {
		c.Bootstrap, c.WorkMs = true, int(ttl.Milliseconds()/20)
	}},
	{name: "node 0 listed twice", aliased: true, apply: func(ttl time.Duration, c *workerConfig) {
		c.Fencing, c.Row, c.PauseMs = "none", 2, 100
		c.AliasDownMs, c.WorkMs = 2000, int(ttl.Milliseconds()/20)
	}},
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// renameNodes gives the worker's node i the name name(i, port).
func renameNodes(c *workerConfig, name func(i int, port string) string) {
	for i, a := range c.Nodes {
		_, port, _ := strings.Cut(a, ":")
		c.Nodes[i] = name(i, port)
	}
}

// reorderNodes lists the worker's nodes in another order (with their
// proxies).
func reorderNodes(c *workerConfig, order func(n int) []int) {
	idx := order(len(c.Nodes))
	nodes, dial := make([]string, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		nodes[i], dial[i] = c.Nodes[j], c.Dial[j]
	}
	c.Nodes, c.Dial = nodes, dial
}

// nemesisWorker sets up worker w's client as nemesisClients says. Now and
// then a section stalls past its lease between read and write (a GC
// pause, a slow disk), so that stale holders meet the fence; Do's
// renewal keeps the lease of the sections under Do alive instead.
func nemesisWorker(w int, cfg *workerConfig) {
	ttl := time.Duration(cfg.TTLms) * time.Millisecond
	cfg.StallRate, cfg.StallMin, cfg.StallMax = 0.02, cfg.TTLms, cfg.TTLms*3/2
	nemesisClients[w%len(nemesisClients)].apply(ttl, cfg)
}

// nemesisWith returns a script that runs a seeded schedule of the given
// kinds of fault until the workers are done.
// Most of the time at most two nodes are impaired (a restarted node counts
// until its quarantine is over), so the lock stays available; now and then
// three nodes restart empty at once, and nothing may be granted until
// their quarantine ends.
func nemesisWith(kinds []nemesisKind) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if err := e.crew.warm(ctx, 1); err != nil {
			return err
		}
		e.log.mark(true)
		n := &nemesisState{e: e, kinds: kinds, start: time.Now(), busy: make([]time.Time, e.cluster.lockN),
			quarantine: quarantineFor(e.sc.TTL)}
		defer n.wg.Wait()
		for ctx.Err() == nil {
			if sleep(ctx, time.Duration(150+e.rng.IntN(350))*time.Millisecond) != nil {
				return nil
			}
			n.step(ctx)
		}
		return nil
	}
}

// nemesisState is the state of one nemesis schedule.
type nemesisState struct {
	e          *env
	kinds      []nemesisKind
	start      time.Time
	quarantine time.Duration
	wg         sync.WaitGroup

	mu   sync.Mutex
	busy []time.Time // per node: impaired until
}

// nemesisKind is a kind of fault the nemesis injects, with its weight.
type nemesisKind struct {
	kind   string
	weight int
}

// nemesisKinds are the nemesis's faults and their weights.
var nemesisKinds = []nemesisKind{
	{"restart-empty", 3}, {"restart-down", 1}, {"rolling-restart", 1}, {"restart-3", 2}, {"flush-3", 1},
	{"pause", 2}, {"partition", 2}, {"slow", 2}, {"worker-freeze", 1},
}

// restartHeavy is the no-quarantine twin's mix: mostly three nodes losing
// their data at once, each a chance to grant a lease the nodes forgot, so
// that a short run shows the double grants at any load. Most of those are
// flushes: a FLUSHALL takes effect at once, while a restart takes 0.1-0.4 s
// (over a second on a loaded machine, past the 1 s leases the nodes forgot,
// when the twin found no double grant in one of ten quick profiles).
var restartHeavy = []nemesisKind{
	{"restart-empty", 1}, {"restart-3", 3}, {"flush-3", 8}, {"pause", 1}, {"partition", 1}, {"slow", 1}, {"worker-freeze", 1},
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

// pick draws a kind by weight.
func (n *nemesisState) pick() string {
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

// step injects one fault, chosen by the seeded generator.
func (n *nemesisState) step(ctx context.Context) {
	e := n.e
	free := n.free()
	kind := n.pick()
	impaired := e.cluster.lockN - len(free)
	switch {
	case (kind == "restart-3" || kind == "flush-3") && len(free) < 3, kind == "rolling-restart" && impaired > 1:
		kind = "worker-freeze"
	case kind != "worker-freeze" && kind != "restart-3" && kind != "flush-3" && impaired >= 2:
		kind = "worker-freeze"
	}
	node := -1
	if len(free) > 0 {
		node = free[e.rng.IntN(len(free))]
	}
	q, ttl := n.quarantine, e.sc.TTL
	e.log.count(kind)
	switch kind {
	case "restart-empty":
		n.hold(node, q+300*time.Millisecond)
		n.note("kill -9 node %d, restart empty", node)
		n.wg.Go(func() { n.restart(ctx, node, 0) })
	case "restart-down":
		down := n.ms(100, 800)
		n.hold(node, down+q+300*time.Millisecond)
		n.note("kill -9 node %d, restart empty after %v", node, down)
		n.wg.Go(func() { n.restart(ctx, node, down) })
	case "restart-3":
		nodes := n.three(free)
		n.note("kill -9 nodes %v at once, restart empty (no quorum until their quarantine ends)", nodes)
		for _, i := range nodes {
			n.hold(i, q+300*time.Millisecond)
			n.wg.Go(func() { n.restart(ctx, i, 0) })
		}
	case "flush-3":
		nodes := n.three(free)
		n.note("FLUSHALL nodes %v at once (their data is gone at once, the processes go on)", nodes)
		for _, i := range nodes {
			n.hold(i, q+300*time.Millisecond)
			n.wg.Go(func() { n.flush(ctx, i) })
		}
	case "rolling-restart":
		n.rolling(ctx, free)
	case "pause":
		d := n.ms(50, int(ttl.Milliseconds()*3/2))
		n.hold(node, d+100*time.Millisecond)
		n.note("SIGSTOP node %d for %v", node, d)
		nd := e.cluster.nodes[node]
		if err := nd.Pause(); err == nil {
			n.wg.Go(func() { time.Sleep(d); _ = nd.Resume() })
		}
	case "partition":
		d, ws, cut := n.ms(100, int(ttl.Milliseconds()*3/2)), n.workers(), e.rng.IntN(2) == 0
		n.hold(node, d+100*time.Millisecond)
		how := "blackhole"
		if cut {
			how = "cut (connections reset, refused)"
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
	case "slow":
		d, lat, ws := n.ms(200, int(ttl.Milliseconds()*3/2)), n.ms(5, int(ttl.Milliseconds()/4)), n.workers()
		n.hold(node, d+100*time.Millisecond)
		n.note("node %d %v slower for workers %v for %v", node, lat, ws, d)
		for _, w := range ws {
			p := e.cluster.prox[w][node]
			p.SetLatency(lat)
			n.wg.Go(func() { time.Sleep(d); p.SetLatency(0) })
		}
	case "worker-freeze":
		w := e.rng.IntN(e.sc.Workers)
		d := ttl + n.ms(0, int(ttl.Milliseconds()))
		n.note("SIGSTOP worker %d for %v", w, d)
		p := e.crew.procs[w]
		if err := p.freeze(); err == nil {
			n.wg.Go(func() { time.Sleep(d); _ = p.thaw() })
		}
	}
}

// rolling restarts two to five nodes empty, one after another, each once
// the one before has served its quarantine. While it runs, one worker
// may be cut off from the node restarted last, so that the clients that
// re-admit the others cannot reach it (issue 11, item 3).
func (n *nemesisState) rolling(ctx context.Context, free []int) {
	e := n.e
	order := make([]int, e.cluster.lockN)
	for i := range order {
		order[i] = i
	}
	e.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	order = order[:2+e.rng.IntN(len(order)-1)]
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
		for !slices.Contains(n.free(), i) {
			if sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
		}
		if i == last && cutOff >= 0 {
			p := e.cluster.prox[cutOff][last]
			p.Blackhole(false)
		}
		n.hold(i, n.quarantine+300*time.Millisecond)
		n.restart(ctx, i, 0)
		if sleep(ctx, n.quarantine+n.ms(100, 300)) != nil {
			return
		}
	}
}

// NemesisWorker is what one of the nemesis's clients did.
type NemesisWorker struct {
	Worker        int    `json:"worker"`
	Client        string `json:"client"`
	Refused       bool   `json:"expect_refused"`                            // its settings disagree with the deployment's
	Aliased       bool   `json:"expect_refused_once_named_twice,omitempty"` // it lists node 0 twice: refused once the second name answers
	Polling       bool   `json:"polling"`                                   // it polls TryLock: grants not required
	Granted       int    `json:"granted"`                                   // leases it got
	Accepted      int    `json:"accepted"`
	Refusals      int    `json:"refusals"` // lock calls refused with a *redlock.ConfigError
	RefusalError  string `json:"refusal_error,omitempty"`
	OtherFailures int    `json:"other_failures"` // lock calls that failed otherwise
	Panics        int    `json:"panics,omitempty"`
	AfterPanic    int    `json:"granted_after_panic,omitempty"`
	Extends       int    `json:"extends,omitempty"`
	ExtendErrors  int    `json:"extend_errors,omitempty"`
	LastError     string `json:"last_error,omitempty"`
}

// judgeNemesis checks what the expectations cannot say: the safety
// measures beyond overlaps and lost updates, that every misconfigured
// client was refused with a clear error and never got a lock, and that
// the well-configured ones kept working (also after a panic in fn).
func judgeNemesis(e *env, r *Result, h *history, stats []*workerStats) []string {
	var bad []string
	if e.fault != nil && e.fault.noQuarantine {
		// The lock is broken on purpose: report, judge nothing but the
		// expectations.
		r.Nemesis = nemesisWorkers(h, stats)
		return nil
	}
	if r.ValidOverlaps != 0 {
		bad = append(bad, fmt.Sprintf("%d overlaps of valid lease windows, want 0", r.ValidOverlaps))
	}
	if r.GrantInversions != 0 {
		bad = append(bad, fmt.Sprintf("%d grants with a fencing token not above an earlier grant's, want 0", r.GrantInversions))
	}
	if r.TokenInversions != 0 {
		bad = append(bad, fmt.Sprintf("%d writes accepted with an older token, want 0", r.TokenInversions))
	}
	r.Nemesis = nemesisWorkers(h, stats)
	for w, nw := range r.Nemesis {
		c, st := nemesisClients[w%len(nemesisClients)], stats[w]
		if st == nil {
			bad = append(bad, fmt.Sprintf("worker %d (%s) left no statistics", w, c.name))
			continue
		}
		switch {
		case c.aliased && nw.Refusals == 0:
			bad = append(bad, fmt.Sprintf("worker %d (%s) was never refused once its second name for node 0 answered (last error: %s)", w, c.name, st.LastError))
		case c.aliased:
		case c.refused && nw.Granted > 0:
			bad = append(bad, fmt.Sprintf("worker %d (%s) has settings the deployment refuses, yet got %d leases", w, c.name, nw.Granted))
		case c.refused && nw.Refusals == 0:
			bad = append(bad, fmt.Sprintf("worker %d (%s) was never refused with a *redlock.ConfigError (last error: %s)", w, c.name, st.LastError))
		case !c.refused && nw.Refusals > 0:
			bad = append(bad, fmt.Sprintf("worker %d (%s) has the deployment's settings, yet was refused %d times: %s", w, c.name, nw.Refusals, st.RefusedError))
		case !c.refused && nw.Granted == 0 && !c.polls:
			bad = append(bad, fmt.Sprintf("worker %d (%s) never got the lock (last error: %s)", w, c.name, st.LastError))
		}
		if e.cfgs[w].Style == styleDoPanic && (nw.Panics == 0 || nw.AfterPanic == 0) {
			bad = append(bad, fmt.Sprintf("worker %d (%s): %d panics in fn, %d leases after the first; want both > 0", w, c.name, nw.Panics, nw.AfterPanic))
		}
		if e.cfgs[w].Style == styleDoExtend && nw.Extends == 0 {
			bad = append(bad, fmt.Sprintf("worker %d (%s) never called Extend from fn", w, c.name))
		}
	}
	return bad
}

// nemesisWorkers is what each client did: its leases from the history,
// the rest from its statistics (none for a worker that left none).
func nemesisWorkers(h *history, stats []*workerStats) []NemesisWorker {
	granted := map[int]int{}
	for _, s := range h.sections {
		granted[s.Worker]++
	}
	out := make([]NemesisWorker, len(stats))
	for w, st := range stats {
		c := nemesisClients[w%len(nemesisClients)]
		nw := NemesisWorker{Worker: w, Client: c.name, Refused: c.refused, Aliased: c.aliased, Polling: c.polls, Granted: granted[w]}
		if st != nil {
			nw.Accepted, nw.Refusals, nw.RefusalError = st.Accepted, st.Refused, st.RefusedError
			nw.OtherFailures = st.Failures - st.Refused
			nw.Panics, nw.AfterPanic, nw.Extends, nw.ExtendErrors = st.Panics, st.AfterPanic, st.Extends, st.ExtendErrors
			nw.LastError = st.LastError
		}
		out[w] = nw
	}
	return out
}
