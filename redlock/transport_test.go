package redlock

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// The record of a node's transport errors is one per go-redis client,
// however many Clients are built over it (a service may build one per
// request over shared node clients): the dial hook goes on the go-redis
// client once, and the record is dropped when the client is collected.
func TestTransport_OneRecordPerRedisClientDroppedWithIt(t *testing.T) {
	cl := newCluster(t, 3)
	nodes := cl.universal()
	first, err := New(nodes, WithProbeTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	for range 3 {
		c, err := New(nodes, WithProbeTimeout(time.Second))
		require.NoError(t, err)
		for i := range nodes {
			require.Same(t, first.nodes[i].net, c.nodes[i].net, "node %d: a second record (and dial hook) for the same go-redis client", i)
		}
		require.NoError(t, c.Close())
	}

	// A go-redis client nobody refers to any more takes its record with it.
	k := func() weak.Pointer[redis.Client] {
		rc := redis.NewClient(&redis.Options{Addr: cl.nodes[0].Addr()})
		require.NotNil(t, transportOf(rc))
		_ = rc.Close()
		return weak.Make(rc)
	}()
	_, ok := transports.Load(k)
	require.True(t, ok, "no record for the client")
	require.Eventually(t, func() bool {
		runtime.GC()
		_, ok := transports.Load(k)
		return !ok
	}, 5*time.Second, 10*time.Millisecond, "the record outlived its go-redis client")
}

// A call that runs out of time costs go-redis its connection, and the
// next connection is set up (TCP, HELLO) inside the next call's budget,
// 50 ms for a 1 s ttl. Here every new connection to every node takes
// 300 ms before its first reply, as on a busy host or a long TLS link,
// while calls on a connection already set up are fast. Once the
// connections New made are gone, a Lock must still get the key. Without
// the background PING (warm), every attempt ran out of time setting up
// connections, every node missed every round, and Lock gave up after its
// 5 s with "3 of 3 nodes unreachable (not waited for ...)", as the chaos
// nemesis's clients did on a loaded machine. (With a 150 ms setup the
// test passed without warm too: the identity proof, whose budget is four
// node timeouts, 200 ms, left connections behind.)
func TestTransport_LockWorksWhenNewConnectionsTakeLongerThanTheNodeTimeout(t *testing.T) {
	const ttl = time.Second
	ctx := context.Background()
	cl := newCluster(t, 3)
	var list []redis.UniversalClient
	var pxs []*switchProxy
	for i := range cl.nodes {
		px := newSwitchProxy(t, cl.nodes[i].Addr())
		uc := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = uc.Close() })
		pxs, list = append(pxs, px), append(list, uc)
	}
	c, err := New(list, WithMaxTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Bootstrap(ctx))
	require.Equal(t, 50*time.Millisecond, c.nodeTimeout(ttl))

	for _, px := range pxs {
		px.slowSetup(300 * time.Millisecond)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, testenv.Key(t), ttl)
	require.NoError(t, err, "no attempt got a connection set up in time")
	require.NoError(t, l.Release(ctx))
}

// The background PING to a node that ran out of time goes to a frozen
// node here. go-redis's handshake honours a deadline, not a cancelled
// ctx, so Close waits for it: bounded by the probe timeout (1 s), Close
// returns within it. Bounded by the cleanup timeout (10 s here), Close
// took 5 s, go-redis's DialTimeout.
func TestTransport_CloseWaitsForAPingToAFrozenNodeAtMostTheProbeTimeout(t *testing.T) {
	cl := newCluster(t, 3)
	c, _ := cl.build(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true }, WithCleanupTimeout(10*time.Second))
	require.NoError(t, c.Bootstrap(context.Background()))
	cl.freeze(t, 2)
	t.Cleanup(func() { cl.thaw(t, 2) })
	// Not released: a release's call to the frozen node is waited for
	// by Close on its own terms.
	_, err := c.TryLock(context.Background(), testenv.Key(t), time.Second)
	require.NoError(t, err, "nodes 0 and 1 grant")
	require.Eventually(t, c.nodes[2].warming.Load, 5*time.Second, 5*time.Millisecond, "no PING went to the frozen node")

	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	t.Logf("Close took %v", took)
	require.Less(t, took, 3*time.Second, "Close waited for the PING to the frozen node past the probe timeout")
	require.False(t, c.nodes[2].warming.Load())
}
