package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcdTTL is the session lease of the etcd-3 runs. etcd grants leases in
// whole seconds, and no shorter than 1.5 election timeouts (750 ms with the
// suite's 500 ms), so one second is the shortest it can be.
const etcdTTL = time.Second

// etcdPrefix is the prefix of the lock's keys: each waiter puts one key
// under it, and the oldest holds the lock.
const etcdPrefix = "/chaos/lock/"

// newEtcdClient is a client of the members at endpoints, silent (the
// faults make it log every failed dial) and quick to give up on a dead or
// stopped member: it pings each connection every 500 ms and drops one
// that does not answer within 500 ms, so its calls move to the others.
// (The suite's members accept pings that often; see internal/servers.)
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          time.Second,
		DialKeepAliveTime:    500 * time.Millisecond,
		DialKeepAliveTimeout: 500 * time.Millisecond,
		Logger:               zap.NewNop(),
	})
}

// explainEtcd says why a call failed when the reason is a lost quorum, in
// the words the report's no-quorum check looks for. A member without a
// leader answers "no leader" to calls that ask for one
// (clientv3.WithRequireLeader), but the client retries that answer until
// the call's deadline, so a timeout is explained by asking every member
// whether it knows a leader.
func explainEtcd(cli *clientv3.Client, err error) error {
	if err == nil {
		return nil
	}
	if !errors.Is(err, rpctypes.ErrNoLeader) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	eps := cli.Endpoints()
	answered, led := 0, 0
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		st, serr := cli.Status(ctx, ep)
		cancel()
		if serr != nil {
			continue
		}
		answered++
		if st.Leader != 0 {
			led++
		}
	}
	if led > 0 {
		return err
	}
	return fmt.Errorf("etcd: no quorum: %d of %d members answered and none has a leader: %w", answered, len(eps), err)
}

// startEtcd starts the topology's members.
func startEtcd(ctx context.Context, c *cluster, b Backend, specs []RedisSpec) error {
	nodes, stop, err := b.StartEtcd(ctx, len(specs))
	if err != nil {
		return err
	}
	c.nodes = append(c.nodes, nodes...)
	c.stops = append(c.stops, stop)
	return nil
}

func (c *cluster) endpoints() []string {
	eps := make([]string, c.lockN)
	for i := range eps {
		eps[i] = c.nodes[i].Addr()
	}
	return eps
}

// warmEtcd takes and releases the lock once.
func warmEtcd(ctx context.Context, c *cluster, ttl time.Duration, _ bool) error {
	cli, err := newEtcdClient(c.endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	return lockEtcdOnce(ctx, cli, ttl)
}

// probeEtcd tries one lock, as a worker would (a session, then the
// Mutex), within two seconds.
func probeEtcd(ctx context.Context, c *cluster, ttl time.Duration) error {
	var err error
	cli, err := newEtcdClient(c.endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return explainEtcd(cli, lockEtcdOnce(pctx, cli, ttl))
}

func lockEtcdOnce(ctx context.Context, cli *clientv3.Client, ttl time.Duration) error {
	ctx = clientv3.WithRequireLeader(ctx)
	lease, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID))
	if err != nil {
		return err
	}
	defer s.Close()
	m := concurrency.NewMutex(s, etcdPrefix)
	if err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(ctx)
}

// etcdLeader returns the index of the member that leads the cluster.
func etcdLeader(ctx context.Context, c *cluster) (int, error) {
	cli, err := newEtcdClient(c.endpoints())
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	var errs []error
	for i, ep := range c.endpoints() {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("chaos: no etcd member says it leads: %w", errors.Join(errs...))
}
