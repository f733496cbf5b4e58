package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Bootstrap is safe to run at every start (docs/protocol.md, "Bootstrap").
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

func TestBootstrap_AdmitsANewDeploymentAtOnce(t *testing.T) {
	cl := newCluster(t, 5)
	c := cl.client(t)
	ctx := context.Background()
	require.NoError(t, c.Bootstrap(ctx))
	require.NoError(t, c.Bootstrap(ctx), "Bootstrap is not idempotent")
	l, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for i := range 5 {
		require.Equal(t, deploymentOf(c), cl.value(t, i, keyMarker), "node %d", i)
	}
}

func TestBootstrap_RefusesUsedOrUnreachableNodes(t *testing.T) {
	ctx := context.Background()
	t.Run("quarantine in progress", func(t *testing.T) {
		cl := newCluster(t, 5)
		c := cl.client(t, WithMaxTTL(time.Second))
		_, err := c.TryLock(ctx, testenv.Key(t), time.Second) // starts the quarantines
		require.ErrorIs(t, err, ErrNodeQuarantined)
		err = c.Bootstrap(ctx)
		require.ErrorIs(t, err, ErrNotNew)
		for i := range 5 {
			require.False(t, cl.admittedOn(t, i), "node %d admitted though Bootstrap refused", i)
		}
	})
	t.Run("other settings", func(t *testing.T) {
		cl := newCluster(t, 5)
		c := cl.client(t)
		cl.set(t, keyMarker, settingsString(5, time.Second, 0.01), 0, 3)
		err := c.Bootstrap(ctx)
		require.ErrorIs(t, err, ErrConfigMismatch)
		require.False(t, cl.admittedOn(t, 0), "one refusal must admit nothing")
	})
	t.Run("a node down", func(t *testing.T) {
		cl := newCluster(t, 5)
		c, f := cl.faulty(t)
		f.fail(errors.New("connection refused"), "", 4)
		err := c.Bootstrap(ctx)
		require.ErrorContains(t, err, "connection refused")
		require.False(t, cl.admittedOn(t, 0), "Bootstrap must see every node before admitting any")
	})
}

func TestBootstrap_OnADeploymentInUseAdmitsNothing(t *testing.T) {
	const ttl = 8 * time.Second
	for _, tc := range []struct {
		name string
		wipe func(t *testing.T, cl *cluster)
	}{
		{"one node flushed", func(t *testing.T, cl *cluster) {
			require.NoError(t, cl.raw[0].FlushAll(context.Background()).Err())
		}},
		{"three nodes restarted empty", func(t *testing.T, cl *cluster) {
			for i := range 3 {
				cl.restartEmpty(t, i)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 5)
			ctx := context.Background()
			a := cl.client(t, WithMaxTTL(ttl))
			require.NoError(t, a.Bootstrap(ctx))
			key := testenv.Key(t)
			// The first lease is held on nodes 0, 1 and 2 only.
			cl.hold(t, key, time.Second, 3, 4)
			first, err := a.TryLock(ctx, key, ttl)
			require.NoError(t, err)
			// TryLock returns at a majority: its acquires on nodes 3 and 4
			// must have been refused before the other owner goes.
			settled(t, a, 2*time.Second)
			cl.drop(t, key, 3, 4)
			tc.wipe(t, cl)

			b := cl.client(t, WithMaxTTL(ttl))
			err = b.Bootstrap(ctx)
			require.ErrorIs(t, err, ErrNotNew, "Bootstrap on a deployment in use")
			var nn *NotNewError
			require.ErrorAs(t, err, &nn)
			require.NotEmpty(t, nn.Nodes)
			q := quarantineOf(b)
			for _, n := range nn.Nodes {
				require.NoError(t, n.Err)
				require.False(t, cl.admittedOn(t, n.Node), "node %d admitted though Bootstrap refused", n.Node)
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
	cl := newCluster(t, 5)
	ctx := context.Background()
	require.NoError(t, cl.client(t).Bootstrap(ctx))
	var wiped atomic.Bool
	b, f := cl.faulty(t)
	f.after(func(c *call, _ error) {
		if c.Node == 0 && c.Script == "state" && wiped.CompareAndSwap(false, true) {
			cl.wipe(t, 0)
		}
	})
	require.NoError(t, b.Bootstrap(ctx))
	require.True(t, wiped.Load())
	require.False(t, cl.admittedOn(t, 0), "Bootstrap admitted node 0, wiped after it was seen admitted")
}

// The write that admits a node takes effect only on the node Bootstrap
// inspected: a node that restarts empty before the write lands (as when
// go-redis retries the call after the restart reset its connection) is not
// admitted.
func TestBootstrap_TheAdmittingWriteNeedsTheInspectedNode(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	var restarted atomic.Bool
	b, f := cl.faulty(t)
	f.before(func(_ context.Context, c *call) error {
		// The admitting write: "admit" now; the one bootstrap call before.
		if c.Node == 0 && c.Script == "bootstrap" && (c.Args[0] == "admit" || strings.HasPrefix(fmt.Sprint(c.Args[0]), settingsPrefix)) &&
			restarted.CompareAndSwap(false, true) {
			cl.restartEmpty(t, 0)
		}
		return nil
	})
	err := b.Bootstrap(ctx)
	require.True(t, restarted.Load())
	require.Error(t, err, "Bootstrap reported success though node 0 restarted empty before its admission")
	require.False(t, cl.admittedOn(t, 0), "the admitting write landed on a node that lost its data after Bootstrap inspected it")
	for i := 1; i < 5; i++ {
		require.True(t, cl.admittedOn(t, i), "node %d", i)
	}
	// Node 0 serves an ordinary quarantine from its next use.
	_, err = b.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err, "four admitted nodes are a majority")
	require.Eventually(t, func() bool {
		n, err := cl.raw[0].Exists(ctx, keyPending).Result()
		return err == nil && n == 1
	}, 5*time.Second, 10*time.Millisecond, "node 0's quarantine never started")
}

// Bootstrap at every start of a new deployment: the first admits it, the
// rest find it admitted and return nil.
func TestBootstrap_IsSafeToRunAtEveryStart(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	for range 3 {
		require.NoError(t, cl.client(t).Bootstrap(ctx))
	}
	for i := range 5 {
		require.True(t, cl.admittedOn(t, i), "node %d", i)
	}
	// A quarantine a first use started is not ended by Bootstrap: the
	// deployment is in use.
	c := newCluster(t, 5).client(t, WithMaxTTL(2*time.Second))
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	err = c.Bootstrap(ctx)
	var nn *NotNewError
	require.True(t, errors.As(err, &nn), "got %v", err)
	require.Len(t, nn.Nodes, 5)
}

// Bootstrap's claims must all land within its window on the client's
// clock (docs/protocol.md, "Bootstrap"): a claim round slower than that is
// stamped anew, and after three slow rounds Bootstrap gives up admitting
// nothing, so that it never relies on claims older than the window.
func TestBootstrap_ClaimsLandWithinTheWindow(t *testing.T) {
	ctx := context.Background()
	const maxTTL = time.Second
	claims := func(c *call) bool { return c.Script == "bootstrap" && len(c.Args) > 0 && c.Args[0] == "claim" }
	t.Run("a slow round is claimed again", func(t *testing.T) {
		cl := newCluster(t, 5)
		c, f := cl.faulty(t, WithMaxTTL(maxTTL))
		w := bootstrapWindowOf(c)
		var slowed atomic.Bool
		f.before(func(ctx context.Context, cc *call) error {
			if claims(cc) && cc.Node == 4 && slowed.CompareAndSwap(false, true) {
				select { // the first claim on node 4 takes longer than the window
				case <-time.After(w + w/2):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		require.NoError(t, c.Bootstrap(ctx))
		require.True(t, slowed.Load(), "the claim was never slowed: the test proves nothing")
		require.GreaterOrEqual(t, f.count("bootstrap", 0), int64(3), "node 0 was not claimed again after the slow round (read, claim, claim, admit)")
		for i := range 5 {
			require.True(t, cl.admittedOn(t, i), "node %d not admitted", i)
		}
		l, err := c.TryLock(ctx, testenv.Key(t), maxTTL)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	})
	t.Run("three slow rounds admit nothing", func(t *testing.T) {
		cl := newCluster(t, 5)
		c, f := cl.faulty(t, WithMaxTTL(maxTTL))
		w := bootstrapWindowOf(c)
		f.before(func(ctx context.Context, cc *call) error {
			if claims(cc) && cc.Node == 4 {
				select {
				case <-time.After(w + w/2):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		err := c.Bootstrap(ctx)
		require.Error(t, err)
		require.Contains(t, err.Error(), "more than the")
		for i := range 5 {
			require.False(t, cl.admittedOn(t, i), "node %d admitted by a Bootstrap whose claims took longer than its window", i)
		}
	})
}
