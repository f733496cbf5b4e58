package chaos

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// cluster is a run's lock servers and every worker's links to them.
type cluster struct {
	nodes []RedisNode // the lock nodes first, then any others (a replica)
	lockN int         // how many of nodes a client locks on
	prox  [][]*Proxy  // [worker][lock node]: what each worker dials
	repl  *Proxy      // the replication link, where the topology has one
}

// start starts t's servers, with the lock nodes' settings as f wants
// them, and one proxy per worker and lock node. On error, what did start
// is left for stop.
func (c *cluster) start(ctx context.Context, b Backend, t *topology, f *fault, workers int) error {
	specs := make([]RedisSpec, t.lockNodes)
	if f.nodes != nil {
		f.nodes(specs)
	}
	c.lockN = t.lockNodes
	if err := t.start(ctx, c, b, specs); err != nil {
		return err
	}
	c.prox = make([][]*Proxy, workers)
	for w := range c.prox {
		for n := range c.lockN {
			p, err := NewProxy(c.nodes[n].Addr())
			if err != nil {
				return err
			}
			c.prox[w] = append(c.prox[w], p)
		}
	}
	return nil
}

// stop closes the proxies and stops the servers.
func (c *cluster) stop() {
	if c.repl != nil {
		_ = c.repl.Close()
	}
	for _, ps := range c.prox {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	for _, n := range c.nodes {
		if n != nil {
			_ = n.Stop()
		}
	}
}

// directClients connects to the lock nodes without proxies.
func (c *cluster) directClients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, c.lockN)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{Addr: c.nodes[i].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	return cs
}

func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// warmup admits the new topology at once (Bootstrap: it is new, and
// otherwise its nodes would serve one quarantine from first use), takes
// and releases a lock once, then waits until t is ready.
func (c *cluster) warmup(ctx context.Context, t *topology, sc Scenario) error {
	cs := c.directClients()
	defer closeAll(cs)
	opts := []redlock.Option{redlock.WithMaxTTL(sc.TTL), redlock.WithNodeTimeout(time.Second)}
	if !sc.Quarantine() {
		opts = append(opts, redlock.WithoutRestartQuarantine())
	}
	lc, err := redlock.New(cs, opts...)
	if err != nil {
		return err
	}
	defer lc.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := lc.Bootstrap(wctx); err != nil {
		return err
	}
	l, err := lc.Lock(wctx, "chaos:warmup", sc.TTL)
	if err != nil {
		return err
	}
	_ = l.Release(wctx)
	if t.ready != nil {
		return t.ready(wctx, c)
	}
	return nil
}
