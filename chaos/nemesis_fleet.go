package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

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
	// changed: a client of the settings a reconfiguration nemesis moves
	// the deployment to and back from (nemesis-reconfig); the others are
	// clients of the deployment's first settings.
	changed bool
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
