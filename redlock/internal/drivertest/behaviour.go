package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Behaviour runs redlock's behaviour through the public API on five
// redis-server nodes reached through Conns of dial. The harness reads the
// nodes through go-redis clients of its own, never through the driver
// under test.
func Behaviour(t *testing.T, dial Dial) {
	nodes := testenv.RedisNodes(t, 5)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Dial, []*testenv.RedisNode)
	}{
		{"LockExtendRelease", lockExtendRelease},
		{"Do", do},
		{"FencingTokensIncrease", fencingTokensIncrease},
		{"WaiterWokenByRelease", waiterWokenByRelease},
		{"KeyHandOff", keyHandOff},
		{"Inspect", inspect},
		{"Check", check},
		{"ScriptFlush", scriptFlush},
		{"LeastPrivilegeUser", func(t *testing.T, dial Dial, nodes []*testenv.RedisNode) { leastPrivilegeUser(t, dial, nodes) }},
		{"ReplyErrorRefuses", replyErrorRefuses},
		{"SameServerTwice", sameServerTwice},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dial, nodes) })
	}
	// The faults get nodes of their own.
	t.Run("NodeKilled", func(t *testing.T) { nodeKilled(t, dial) })
	t.Run("NodeFrozen", func(t *testing.T) { nodeFrozen(t, dial) })
}

// conns dials every node as user ("": the default user).
func conns(t *testing.T, dial Dial, nodes []*testenv.RedisNode, user, password string) []driver.Conn {
	t.Helper()
	out := make([]driver.Conn, len(nodes))
	for i, n := range nodes {
		out[i] = dial(t, n.Addr(), user, password)
	}
	return out
}

// client is a Client over Conns of dial to nodes, the deployment
// bootstrapped (once: later clients find it in use), closed when t ends.
func client(t *testing.T, dial Dial, nodes []*testenv.RedisNode, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.NewFromConns(conns(t, dial, nodes, "", ""), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var notNew *redlock.NotNewError
	if err := c.Bootstrap(context.Background()); err != nil && !errors.As(err, &notNew) {
		require.NoError(t, err)
	}
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func lockExtendRelease(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	a, b := client(t, dial, nodes), client(t, dial, nodes)
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	l, err := a.TryLock(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, key, l.Key())
	require.True(t, l.Deadline().After(time.Now()))
	_, err = b.TryLock(ctx, key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "a second holder while the first holds the key")
	before := l.Deadline()
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	require.True(t, l.Deadline().After(before), "Extend moved the deadline from %v to %v", before, l.Deadline())
	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
	l2, err := b.Lock(ctx, key, 10*time.Second)
	require.NoError(t, err, "Lock of a released key")
	require.NoError(t, l2.Release(ctx))
}

func do(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	c := client(t, dial, nodes)
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	ran := false
	var inside error
	err := c.Do(ctx, key, 5*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		ran = true
		_, inside = c.TryLock(ctx, key, time.Second)
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	require.ErrorIs(t, inside, redlock.ErrNotObtained, "the key was free inside Do")
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err, "Do did not release the key")
	require.NoError(t, l.Release(ctx))
}

func fencingTokensIncrease(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	a, b := client(t, dial, nodes, redlock.WithFencing()), client(t, dial, nodes, redlock.WithFencing())
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	var last uint64
	for i := range 6 {
		c := a
		if i%2 == 1 {
			c = b
		}
		l, err := c.Lock(ctx, key, 5*time.Second)
		require.NoError(t, err)
		require.Greater(t, l.FencingToken(), last, "lease %d", i)
		last = l.FencingToken()
		require.NoError(t, l.Release(ctx))
	}
}

// waitFor waits until cond holds on a majority of the nodes, asked
// through go-redis clients of the harness.
func waitFor(t *testing.T, nodes []*testenv.RedisNode, what string, cond func(ctx context.Context, rc *redis.Client) bool) {
	t.Helper()
	rcs := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		rcs[i] = n.Client(t)
	}
	require.Eventually(t, func() bool {
		ok := 0
		for _, rc := range rcs {
			if cond(context.Background(), rc) {
				ok++
			}
		}
		return ok >= quorum.Majority(len(nodes))
	}, 10*time.Second, 2*time.Millisecond, what)
}

// waiting waits until a Lock call is in key's line and its Client is
// subscribed to key's release notices, on a majority of nodes.
func waiting(t *testing.T, nodes []*testenv.RedisNode, key string) {
	t.Helper()
	waitFor(t, nodes, "a waiter in line and subscribed", func(ctx context.Context, rc *redis.Client) bool {
		subs, err := rc.PubSubNumSub(ctx, script.ReleaseChannel(key)).Result()
		return err == nil && subs[script.ReleaseChannel(key)] > 0 && rc.ZCard(ctx, script.QueueKey(key)).Val() > 0
	})
}

// neverRetry makes Lock wait up to a minute between attempts: only a
// release notice wakes it sooner.
var neverRetry = redlock.WithRetry(func(int) time.Duration { return time.Minute }, 0)

// handOver has holder's lease released while a Lock call of waiter waits
// for key, and returns how long the call took to get the key after the
// release, and its lease.
func handOver(t *testing.T, holder, waiter *redlock.Client, nodes []*testenv.RedisNode, key string) (time.Duration, *redlock.Lease) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	l, err := holder.TryLock(ctx, key, 50*time.Second)
	require.NoError(t, err)
	type got struct {
		l   *redlock.Lease
		err error
		at  time.Time
	}
	done := make(chan got, 1)
	go func() {
		wl, err := waiter.Lock(ctx, key, 10*time.Second)
		done <- got{wl, err, time.Now()}
	}()
	waiting(t, nodes, key)
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	g := <-done
	require.NoError(t, g.err)
	return g.at.Sub(released), g.l
}

// A waiter that would not try again for a minute gets the key soon after
// the holder's release: the release notice, sent by the script on the
// nodes and heard through the driver's Pub/Sub, woke it.
func waiterWokenByRelease(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	holder, waiter := client(t, dial, nodes), client(t, dial, nodes, neverRetry)
	took, l := handOver(t, holder, waiter, nodes, testenv.Key(t))
	require.Less(t, took, 10*time.Second, "the waiter got the key %v after the release: it was not woken", took)
	t.Logf("woken %v after the release", took)
	require.NoError(t, l.Release(context.Background()))
}

// With WithKeyHandOff the release hands the key to the waiter on the
// nodes: a newcomer cannot take it in between, and the waiter holds it.
func keyHandOff(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	holder := client(t, dial, nodes, redlock.WithKeyHandOff())
	waiter := client(t, dial, nodes, redlock.WithKeyHandOff(), neverRetry)
	other := client(t, dial, nodes)
	key := testenv.Key(t)
	took, l := handOver(t, holder, waiter, nodes, key)
	require.Less(t, took, 10*time.Second, "the waiter got the handed key %v after the release", took)
	ctx := ctxFor(t, 10*time.Second)
	_, err := other.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	ks, err := other.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, redlock.VerdictHeld, ks.Verdict, ks.Summary)
	require.NoError(t, l.Release(ctx))
}

func inspect(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	c := client(t, dial, nodes, redlock.WithFencing())
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, redlock.VerdictFree, ks.Verdict, ks.Summary)
	l, err := c.TryLock(ctx, key, 20*time.Second, redlock.WithMetadata("host=a"))
	require.NoError(t, err)
	// TryLock returns at a majority: wait for the rest of the nodes.
	require.Eventually(t, func() bool {
		ks, err = c.Inspect(ctx, key)
		return err == nil && ks.Holders == len(nodes)
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, redlock.VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, "host=a", ks.Metadata)
	require.Equal(t, l.FencingToken(), ks.MaxFence)
	for _, ns := range ks.Nodes {
		require.NoError(t, ns.Err)
		require.Equal(t, redlock.AdmissionAdmitted, ns.Admission, "node %d", ns.Node)
		require.NotEmpty(t, ns.Server.Version, "node %d: INFO server", ns.Node)
		require.Equal(t, "master", ns.Server.Role, "node %d: INFO replication", ns.Node)
		require.Greater(t, ns.TTL, 10*time.Second, "node %d", ns.Node)
	}
	require.NoError(t, l.Release(ctx))
}

func check(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	c := client(t, dial, nodes)
	ctx := ctxFor(t, 30*time.Second)
	rep, err := c.Check(ctx, "app:report")
	require.NoError(t, err)
	for _, n := range rep.Nodes {
		require.NoError(t, n.Err, "node %d", n.Node)
		require.True(t, n.ClockRead, "node %d: TIME", n.Node)
		require.Less(t, n.ClockOffset.Abs(), 5*time.Second, "node %d: TIME read as %v off", n.Node, n.ClockOffset)
		require.True(t, n.ConfigRead, "node %d: CONFIG GET", n.Node)
		require.Equal(t, "noeviction", n.Eviction, "node %d: INFO", n.Node)
		require.True(t, n.ACLChecked, "node %d: the ACL script", n.Node)
		require.Empty(t, n.Denied, "node %d", n.Node)
		require.Equal(t, redlock.AdmissionAdmitted, n.Admission, "node %d", n.Node)
	}
}

// A node whose script cache was emptied answers EVALSHA with NOSCRIPT; the
// call is sent again with the script's source.
func scriptFlush(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	c := client(t, dial, nodes)
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	sha := script.ByName("acquire").Hash()
	for _, n := range nodes {
		rc := n.Client(t)
		require.NoError(t, rc.ScriptFlush(ctx).Err())
		exists, err := rc.ScriptExists(ctx, sha).Result()
		require.NoError(t, err)
		require.False(t, exists[0])
	}
	l, err = c.TryLock(ctx, key, 10*time.Second)
	require.NoError(t, err, "TryLock after SCRIPT FLUSH")
	require.NoError(t, l.Release(ctx))
}
