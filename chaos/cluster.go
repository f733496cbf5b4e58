package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// cluster is a run's lock servers and every worker's links to them.
type cluster struct {
	nodes []RedisNode // redlock-5: five; single: one; single+replica: primary, replica
	lockN int         // nodes in the lock: 5 or 1
	prox  [][]*Proxy  // [worker][lock node]
	repl  *Proxy      // single+replica: the replication link
}

// start starts the servers of sc's topology and one proxy per worker and
// lock node. On error, what did start is left for stop.
func (c *cluster) start(ctx context.Context, b Backend, sc Scenario) error {
	var specs []RedisSpec
	switch sc.Topology {
	case Redlock5:
		specs = make([]RedisSpec, 5)
		c.lockN = 5
		switch sc.Fault {
		case "restart-aof":
			specs[2].AOF = true
		case "clock-jump":
			specs[2].Clock = true
		}
	case Single:
		specs, c.lockN = []RedisSpec{{}}, 1
	case SingleReplica:
		specs, c.lockN = []RedisSpec{{}}, 1
	default:
		return fmt.Errorf("chaos: unknown topology %q", sc.Topology)
	}
	c.nodes = make([]RedisNode, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() { c.nodes[i], errs[i] = b.StartRedis(ctx, specs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if sc.Topology == SingleReplica {
		// The replication link runs through a proxy, so the failover
		// fault can hold it back (a stopped replica process would not do:
		// its kernel keeps accepting the stream, and it applies the
		// buffered writes as soon as it runs again).
		rp, err := NewProxy(c.nodes[0].Addr())
		if err != nil {
			return err
		}
		c.repl = rp
		rep, err := b.StartRedis(ctx, RedisSpec{ReplicaOf: rp.Addr()})
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, rep)
	}
	c.prox = make([][]*Proxy, sc.Workers)
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

// warmup takes and releases a lock once, so the nodes are admitted as a
// deployment before any fault (a brand-new node is admitted only when a
// majority of its peers answer), and, with a replica, waits until the
// replica has every write.
func (c *cluster) warmup(ctx context.Context, sc Scenario) error {
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
	l, err := lc.Lock(wctx, "chaos:warmup", sc.TTL)
	if err != nil {
		return err
	}
	_ = l.Release(wctx)
	if sc.Topology == SingleReplica {
		// A replica that has just started may not be connected yet; WAIT
		// blocks until it has acknowledged every write so far.
		c := redis.NewClient(&redis.Options{Addr: c.nodes[0].Addr(), MaxRetries: -1, ReadTimeout: 15 * time.Second})
		defer c.Close()
		if n, err := c.Do(wctx, "WAIT", 1, 8000).Int64(); err != nil || n < 1 {
			return fmt.Errorf("chaos: the replica did not catch up (WAIT: %d, %v)", n, err)
		}
	}
	return nil
}
