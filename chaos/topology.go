package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// Topology names, as the report and --topology spell them.
const (
	Single        = "single"         // one primary
	SingleReplica = "single+replica" // a primary and an asynchronous replica that a failover promotes
	Redlock5      = "redlock-5"      // five independent primaries
	PgAdvisory    = "pg-advisory"    // a PostgreSQL advisory lock on the counter's own database
	Etcd3         = "etcd-3"         // three etcd members, the official client's Mutex
	PgRow         = "pg-row"         // SELECT ... FOR UPDATE on the protected row itself
	ZK3           = "zk-3"           // three ZooKeeper servers, go-zookeeper's lock recipe
)

// The kinds of lock a worker takes; a topology names one, and the worker
// builds its client from it (worker_lock*.go).
const (
	lockRedlock  = "redlock"
	lockAdvisory = "pg-advisory"
	lockEtcd     = "etcd"
	lockRow      = "pg-row"
	lockZK       = "zookeeper"
)

// topology is one way to deploy the lock service: how its servers start,
// which of them a client locks on (its nodes), and the client settings
// that follow from that.
//
// The Redis topologies lock with a redlock client on their nodes
// (worker_lock.go); pg-advisory takes an advisory lock inside the
// section's transaction (worker_lock_advisory.go), pg-row a lock on the
// row the transaction writes (worker_lock_row.go), etcd-3 the etcd
// client's Mutex (worker_lock_etcd.go) and zk-3 the ZooKeeper recipe
// (worker_lock_zk.go). The worker picks its client by the
// topology's lock kind.
type topology struct {
	name string
	doc  string
	// lock is the kind of lock the workers take (lockRedlock, ...).
	lock string
	// ttl is the lease the runs use unless a fault says otherwise; 0 for
	// a lock that has none (it lasts as long as its transaction).
	ttl time.Duration
	// lockNodes is how many servers a client locks on. A fault's node
	// settings come one per lock node.
	lockNodes int
	// quarantine says whether clients keep restarted nodes out. It is off
	// where no peer can remember a node (one node; see docs/chaos.md).
	quarantine bool
	// nodeTimeout is a client's per-node timeout for leases of ttl.
	nodeTimeout func(ttl time.Duration) time.Duration
	// start starts the servers, the lock nodes first, one per spec.
	start func(ctx context.Context, c *cluster, b Backend, specs []RedisSpec) error
	// warm takes and releases one lock, once the servers started (nil:
	// nothing to wait for).
	warm func(ctx context.Context, c *cluster, ttl time.Duration, quarantine bool) error
	// ready waits, after the warm-up lock, until the deployment is in the
	// state the faults assume (nil: it is as soon as a lock was granted).
	ready func(ctx context.Context, c *cluster) error
	// probe tries one lock of ttl on the lock nodes as they are and
	// returns its error, for the faults that time a refusal.
	probe func(ctx context.Context, c *cluster, ttl time.Duration) error
}

var topologies = []*topology{
	{name: Single, doc: "one primary", lock: lockRedlock, ttl: quickTTL, lockNodes: 1, nodeTimeout: oneNodeTimeout,
		start: startPrimaries, warm: warmRedlock, probe: probeRedlock},
	{name: SingleReplica, doc: "a primary and an asynchronous replica that a failover promotes", lock: lockRedlock,
		ttl: quickTTL, lockNodes: 1, nodeTimeout: oneNodeTimeout, start: startWithReplica, warm: warmRedlock,
		ready: replicaCaughtUp, probe: probeRedlock},
	{name: Redlock5, doc: "five independent primaries", lock: lockRedlock, ttl: quickTTL, lockNodes: 5, quarantine: true,
		nodeTimeout: quorumNodeTimeout, start: startPrimaries, warm: warmRedlock, probe: probeRedlock},
	{name: PgAdvisory, doc: "pg_advisory_xact_lock inside the section's transaction, on the database that holds the counter",
		lock: lockAdvisory, nodeTimeout: noNodeTimeout, start: startNothing},
	{name: Etcd3, doc: "three etcd members; the etcd client's concurrency.Mutex on a session lease",
		lock: lockEtcd, ttl: etcdTTL, lockNodes: 3, nodeTimeout: noNodeTimeout, start: startEtcd, warm: warmEtcd, probe: probeEtcd},
	{name: PgRow, doc: "SELECT ... FOR UPDATE on the counter row inside the section's transaction, which then writes that row",
		lock: lockRow, nodeTimeout: noNodeTimeout, start: startNothing},
	{name: ZK3, doc: "three ZooKeeper servers; go-zookeeper's lock recipe (ephemeral sequential znodes) on a session of zkTTL",
		lock: lockZK, ttl: zkTTL, lockNodes: 3, nodeTimeout: noNodeTimeout, start: startZK, warm: warmZK, probe: probeZK},
}

// allTopologies lists the topology names in report order.
var allTopologies = topologyNames()

func topologyNames() []string {
	names := make([]string, len(topologies))
	for i, t := range topologies {
		names[i] = t.name
	}
	return names
}

// lookupTopology returns the topology called name, or nil.
func lookupTopology(name string) *topology {
	for _, t := range topologies {
		if t.name == name {
			return t
		}
	}
	return nil
}

// oneNodeTimeout: with one node, a timeout only costs availability.
func oneNodeTimeout(time.Duration) time.Duration { return 100 * time.Millisecond }

// quorumNodeTimeout is 15% of the TTL, at least 30 ms: a slow node must
// not eat the validity the quorum's answer leaves.
func quorumNodeTimeout(ttl time.Duration) time.Duration {
	return time.Duration(max(30, ttl.Milliseconds()*15/100)) * time.Millisecond
}

// noNodeTimeout: the client has no per-node timeout (etcd's and
// ZooKeeper's clients and PostgreSQL wait for one server).
func noNodeTimeout(time.Duration) time.Duration { return 0 }

// inTransaction reports whether t's lock lives in the section's own
// transaction on the suite's PostgreSQL: no TTL, no token, no servers
// of its own.
func (t *topology) inTransaction() bool { return t.lock == lockAdvisory || t.lock == lockRow }

// startNothing: the lock lives on the suite's PostgreSQL, which runs
// already.
func startNothing(context.Context, *cluster, Backend, []RedisSpec) error { return nil }

// startPrimaries starts one independent primary per spec, concurrently.
// The first failed start cancels the others; the nodes that did come up
// are in c.nodes, and the run's teardown stops them.
func startPrimaries(ctx context.Context, c *cluster, b Backend, specs []RedisSpec) error {
	nodes := make([]RedisNode, len(specs))
	g, gctx := errgroup.WithContext(ctx)
	for i := range specs {
		g.Go(func() (err error) {
			nodes[i], err = b.StartRedis(gctx, specs[i])
			return err
		})
	}
	err := g.Wait()
	for _, n := range nodes {
		if n != nil {
			c.nodes = append(c.nodes, n)
		}
	}
	return err
}

// startWithReplica starts the primary, then a replica of it behind a
// proxy. The replication link runs through the proxy so that the failover
// fault can hold it back (a stopped replica process would not do: its
// kernel keeps accepting the stream, and it applies the buffered writes
// as soon as it runs again).
func startWithReplica(ctx context.Context, c *cluster, b Backend, specs []RedisSpec) error {
	if err := startPrimaries(ctx, c, b, specs); err != nil {
		return err
	}
	rp, err := newProxy(c.nodes[0].Addr())
	if err != nil {
		return err
	}
	c.repl = rp
	rep, err := b.StartRedis(ctx, RedisSpec{ReplicaOf: rp.Addr()})
	if err != nil {
		return err
	}
	c.nodes = append(c.nodes, rep)
	return nil
}

// replicaCaughtUp waits until the replica has acknowledged every write so
// far; a replica that has just started may not be connected yet.
func replicaCaughtUp(ctx context.Context, c *cluster) error {
	rc := redis.NewClient(&redis.Options{Addr: c.nodes[0].Addr(), MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer rc.Close()
	if n, err := rc.Do(ctx, "WAIT", 1, 8000).Int64(); err != nil || n < 1 {
		return fmt.Errorf("chaos: the replica did not catch up (WAIT: %d, %v)", n, err)
	}
	return nil
}
