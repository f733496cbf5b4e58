package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkLockPath is the parent of the lock's znodes: each waiter creates an
// ephemeral sequential child, and the lowest holds the lock.
const zkLockPath = "/chaos/lock"

// newZKConn connects to the servers with a session of timeout, silent
// (the faults make the client log every failed dial). The connection is
// made in the background; calls wait for it.
func newZKConn(servers []string, timeout time.Duration) (*zk.Conn, error) {
	conn, _, err := zk.Connect(servers, timeout, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zk: connect: %w", err)
	}
	return conn, nil
}

// explainZK says why a call failed when the reason is a lost quorum, in
// the words the report's no-quorum check looks for: a server outside a
// serving quorum closes its clients' connections, and the client keeps
// trying until the call's deadline, so a failure is explained by asking
// every server whether it serves.
func explainZK(servers []string, err error) error {
	if err == nil {
		return nil
	}
	serving := 0
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if _, merr := zkMode(ctx, s); merr == nil {
			serving++
		}
		cancel()
	}
	if serving > 0 {
		return err
	}
	return fmt.Errorf("zk: no quorum: none of the %d servers serves clients: %w", len(servers), err)
}

// startZK starts the topology's servers.
func startZK(ctx context.Context, c *cluster, b Backend, specs []RedisSpec) error {
	nodes, stop, err := b.StartZooKeeper(ctx, len(specs))
	if err != nil {
		return err
	}
	c.nodes = append(c.nodes, nodes...)
	c.stops = append(c.stops, stop)
	return nil
}

// warmZK takes and releases the lock once.
func warmZK(ctx context.Context, c *cluster, ttl time.Duration, _ bool) error {
	return lockZKOnce(ctx, c.endpoints(), ttl)
}

// probeZK tries one lock, as a worker would, within two seconds.
func probeZK(ctx context.Context, c *cluster, ttl time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return explainZK(c.endpoints(), lockZKOnce(pctx, c.endpoints(), ttl))
}

// lockZKOnce takes the recipe's lock and lets it go, on a session of its
// own that ends with it.
func lockZKOnce(ctx context.Context, servers []string, ttl time.Duration) error {
	conn, err := newZKConn(servers, ttl)
	if err != nil {
		return err
	}
	defer conn.Close()
	l := zk.NewLock(conn, zkLockPath, zk.WorldACL(zk.PermAll))
	if err := zkLock(ctx, conn, l, nil); err != nil {
		return err
	}
	return l.Unlock()
}

// zkLock waits in the recipe's Lock until ctx ends. The recipe takes no
// context, so an attempt given up closes the connection, which ends the
// session and with it the waiter's znode, and makes Lock return.
func zkLock(ctx context.Context, conn *zk.Conn, l *zk.Lock, data []byte) error {
	done := make(chan error, 1)
	go func() { done <- l.LockWithData(data) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		conn.Close()
		err := <-done
		if err == nil {
			// Granted as the session closed: gone with it.
			err = errors.New("zk: granted after the attempt was given up")
		}
		return errors.Join(err, ctx.Err())
	}
}

// zkLeader returns the index of the server that leads the ensemble.
func zkLeader(ctx context.Context, c *cluster) (int, error) {
	var errs []error
	for i, ep := range c.endpoints() {
		mode, err := zkMode(ctx, ep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mode == "leader" {
			return i, nil
		}
	}
	return 0, fmt.Errorf("chaos: no ZooKeeper server says it leads: %w", errors.Join(errs...))
}

// clusterLeader is the index of the lock node that leads a consensus
// topology's cluster.
func clusterLeader(ctx context.Context, e *env) (int, error) {
	if e.topo.lock == lockZK {
		return zkLeader(ctx, e.cluster)
	}
	return etcdLeader(ctx, e.cluster)
}
