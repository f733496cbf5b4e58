package redlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Bootstrap is safe to run at every start (docs/fencing.md, "Bootstrap").
// Each test here came from a red-team review that reproduced a double grant
// on redis-server with the Bootstrap before: it admitted a node of a
// deployment in use at once.

// requireNoSecondLease requires that other cannot lock key while first is
// trusted.
func requireNoSecondLease(t *testing.T, other *Client, key string, ttl time.Duration, first *Lease) {
	t.Helper()
	l, err := other.TryLock(context.Background(), key, ttl)
	if err == nil {
		t.Fatalf("DOUBLE GRANT: a second lease on %q (deadline in %v) while the first is trusted for %v more",
			key, time.Until(l.Deadline()).Round(time.Millisecond), time.Until(first.Deadline()).Round(time.Millisecond))
	}
	require.ErrorIs(t, err, ErrNotObtained)
	require.True(t, time.Now().Before(first.Deadline()), "the check ran after the first lease had ended: it proves nothing")
}

func TestBootstrap_OnADeploymentInUseAdmitsNothing(t *testing.T) {
	const ttl = 8 * time.Second
	for _, tc := range []struct {
		name string
		wipe func(t *testing.T, rc *realCluster)
	}{
		{"one node flushed", func(t *testing.T, rc *realCluster) {
			require.NoError(t, rc.raw[0].FlushAll(context.Background()).Err())
		}},
		{"three nodes restarted empty", func(t *testing.T, rc *realCluster) {
			for i := range 3 {
				rc.restartEmpty(t, i)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRealCluster(t, 5)
			ctx := context.Background()
			a := rc.client(t, nil, nil, WithMaxTTL(ttl))
			require.NoError(t, a.Bootstrap(ctx))
			key := testenv.Key(t)
			// The first lease is held on nodes 0, 1 and 2 only.
			rc.hold(t, key, time.Second, 3, 4)
			first, err := a.TryLock(ctx, key, ttl)
			require.NoError(t, err)
			rc.drop(t, key, 3, 4)
			tc.wipe(t, rc)

			b := rc.client(t, nil, nil, WithMaxTTL(ttl))
			err = b.Bootstrap(ctx)
			require.ErrorIs(t, err, ErrNotNew, "Bootstrap on a deployment in use")
			var nn *NotNewError
			require.ErrorAs(t, err, &nn)
			require.NotEmpty(t, nn.Nodes)
			q := b.set.quarantine()
			for _, n := range nn.Nodes {
				require.NoError(t, n.Err)
				require.False(t, rc.admittedOn(t, n.Node), "node %d admitted though Bootstrap refused", n.Node)
				require.Greater(t, n.Left, q/2, "node %d: its quarantine has just started", n.Node)
				require.LessOrEqual(t, n.Left, q, "node %d", n.Node)
				require.Contains(t, err.Error(), "node "+strings.TrimSpace(string(rune('0'+n.Node))))
			}
			require.Contains(t, err.Error(), "quarantine ends in")
			requireNoSecondLease(t, b, key, ttl, first)
			// Running it again changes nothing.
			require.ErrorIs(t, b.Bootstrap(ctx), ErrNotNew)
			requireNoSecondLease(t, b, key, ttl, first)
			require.ErrorIs(t, first.Release(ctx), ErrNotHeld, "the wipe took the lease's keys")
		})
	}
}

// A deployment whose every node is admitted gets no write from Bootstrap:
// a node wiped right after Bootstrap looked at it stays out.
func TestBootstrap_AnAdmittedDeploymentGetsNoWrite(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	require.NoError(t, rc.client(t, nil, nil).Bootstrap(ctx))
	var wiped atomic.Bool
	wrap := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 0 {
			return sc
		}
		return hookScripter{Scripter: sc, after: func(ctx context.Context, script string, _ []string, _ []any, _ *redis.Cmd) {
			if script == "state" && wiped.CompareAndSwap(false, true) {
				require.NoError(t, rc.raw[0].FlushAll(ctx).Err())
			}
		}}
	}
	b := rc.client(t, wrap, nil)
	require.NoError(t, b.Bootstrap(ctx))
	require.True(t, wiped.Load())
	require.False(t, rc.admittedOn(t, 0), "Bootstrap admitted node 0, wiped after it was seen admitted")
}

// The write that admits a node takes effect only on the node Bootstrap
// inspected: a node that restarts empty before the write lands (as when
// go-redis retries the call after the restart reset its connection) is not
// admitted.
func TestBootstrap_TheAdmittingWriteNeedsTheInspectedNode(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	var restarted atomic.Bool
	wrap := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 0 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(_ context.Context, script string, _ []string, args []any) *redis.Cmd {
			// The admitting write: "admit" now; the one bootstrap call before.
			if script == "bootstrap" && (args[0] == "admit" || strings.HasPrefix(args[0].(string), settingsVersion)) &&
				restarted.CompareAndSwap(false, true) {
				rc.restartEmpty(t, 0)
			}
			return nil
		}}
	}
	b := rc.client(t, wrap, nil)
	err := b.Bootstrap(ctx)
	require.True(t, restarted.Load())
	require.Error(t, err, "Bootstrap reported success though node 0 restarted empty before its admission")
	require.False(t, rc.admittedOn(t, 0), "the admitting write landed on a node that lost its data after Bootstrap inspected it")
	for i := 1; i < 5; i++ {
		require.True(t, rc.admittedOn(t, i), "node %d", i)
	}
	// Node 0 serves an ordinary quarantine from its next use.
	_, err = b.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err, "four admitted nodes are a majority")
	require.Eventually(t, func() bool {
		n, err := rc.raw[0].Exists(ctx, script.PendingKey).Result()
		return err == nil && n == 1
	}, 5*time.Second, 10*time.Millisecond, "node 0's quarantine never started")
}

// Bootstrap at every start of a new deployment: the first admits it, the
// rest find it admitted and return nil.
func TestBootstrap_IsSafeToRunAtEveryStart(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	for range 3 {
		require.NoError(t, rc.client(t, nil, nil).Bootstrap(ctx))
	}
	for i := range 5 {
		require.True(t, rc.admittedOn(t, i), "node %d", i)
	}
	// A quarantine a first use started is not ended by Bootstrap: the
	// deployment is in use.
	rc2 := newRealCluster(t, 5)
	c := rc2.client(t, nil, nil, WithMaxTTL(2*time.Second))
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	err = c.Bootstrap(ctx)
	var nn *NotNewError
	require.True(t, errors.As(err, &nn), "got %v", err)
	require.Len(t, nn.Nodes, 5)
}
