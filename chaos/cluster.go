package chaos

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// cluster is a run's lock servers and every worker's links to them.
type cluster struct {
	nodes []Node         // the lock nodes first, then any others (a replica)
	lockN int            // how many of nodes a client locks on
	prox  [][]*proxy     // [worker][lock node]: what each worker dials (Redis topologies)
	repl  *proxy         // the replication link, where the topology has one
	stops []func() error // stop what the nodes' own Stop leaves (an etcd cluster's directory)
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
	if t.lock != lockRedlock {
		return nil // the other clients dial the servers themselves
	}
	c.prox = make([][]*proxy, workers)
	for w := range c.prox {
		for n := range c.lockN {
			p, err := newProxy(c.nodes[n].Addr())
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
	for _, stop := range c.stops {
		_ = stop()
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

// warmup waits until the topology grants a lock, with the topology's own
// warm-up where it has one (nil: nothing to wait for), then until it is
// ready.
func (c *cluster) warmup(ctx context.Context, t *topology, sc Scenario) error {
	warm := t.warm
	if warm == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := warm(wctx, c, sc.TTL, sc.Quarantine()); err != nil {
		return err
	}
	if t.ready != nil {
		return t.ready(wctx, c)
	}
	return nil
}

// warmRedlock admits the new topology at once (Bootstrap: it is new, and
// otherwise its nodes would serve one quarantine from first use), takes
// and releases a lock once, then waits until t is ready.
func warmRedlock(wctx context.Context, c *cluster, ttl time.Duration, quarantine bool) error {
	cs := c.directClients()
	defer closeAll(cs)
	opts := []redlock.Option{redlock.WithMaxTTL(ttl), redlock.WithNodeTimeout(time.Second)}
	if !quarantine {
		opts = append(opts, withoutQuarantine())
	}
	lc, err := redlock.New(cs, opts...)
	if err != nil {
		return err
	}
	defer lc.Close()
	if err := lc.Bootstrap(wctx); err != nil {
		return err
	}
	l, err := lc.Lock(wctx, "chaos:warmup", ttl)
	if err != nil {
		return err
	}
	_ = l.Release(wctx)
	return nil
}
