package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/drift"
)

// newFake builds a Client over n fake nodes of a bootstrapped deployment.
func newFake(t *testing.T, n int, opts ...Option) (*Client, []*fakeNode) {
	t.Helper()
	c, fs := newFakeUnadmitted(t, n, opts...)
	if c.cfg.quarantine {
		require.NoError(t, c.Bootstrap(context.Background()))
		for _, f := range fs {
			f.calls.Store(0)
			f.ended.Store(0)
		}
	}
	return c, fs
}

// newFakeUnadmitted builds a Client over n empty fake nodes: a deployment
// nobody has used yet.
func newFakeUnadmitted(t *testing.T, n int, opts ...Option) (*Client, []*fakeNode) {
	t.Helper()
	c, fs, err := fakeCluster(n, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, f := range fs {
			f.thaw()
		}
		require.NoError(t, c.Close())
	})
	return c, fs
}

func totalCalls(fs []*fakeNode) int64 {
	var n int64
	for _, f := range fs {
		n += f.calls.Load()
	}
	return n
}

func TestBadInputTouchesNoNode(t *testing.T) {
	c, fs := newFake(t, 5, WithMaxTTL(time.Minute))
	ctx := context.Background()
	tests := []struct {
		name string
		key  string
		ttl  time.Duration
		want string
	}{
		{"empty key", "", time.Second, "empty key"},
		{"key in quorumlock's namespace", "quorumlock:fence:k", time.Second, "own namespace"},
		{"the admission marker as a key", markerKey, time.Second, "own namespace"},
		{"zero ttl", "k", 0, "must exceed its drift"},
		{"negative ttl", "k", -time.Second, "must exceed its drift"},
		{"ttl equal to drift", "k", 2 * time.Millisecond, "must exceed its drift"},
		{"ttl above max", "k", 2 * time.Minute, "exceeds the client's max ttl"},
		{"sub-millisecond ttl", "k", time.Second + time.Microsecond, "whole number of milliseconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.TryLock(ctx, tc.key, tc.ttl)
			require.ErrorContains(t, err, tc.want)
			_, err = c.Lock(ctx, tc.key, tc.ttl)
			require.ErrorContains(t, err, tc.want)
			err = c.Do(ctx, tc.key, tc.ttl, func(context.Context, *Lease) error { return nil })
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, totalCalls(fs), "bad input reached a node")
		})
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "localhost:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:2"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:3"}})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:4"}})
	t.Cleanup(func() { a.Close(); b.Close(); cluster.Close(); ring.Close(); failover.Close() })
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []Option
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []redis.UniversalClient{a, nil}, nil, "node 1: nil client"},
		{"typed nil node", []redis.UniversalClient{a, (*redis.Client)(nil)}, nil, "node 1: nil *redis.Client"},
		{"cluster client", []redis.UniversalClient{a, cluster}, nil, "independent primaries"},
		{"ring client", []redis.UniversalClient{ring, a}, nil, "independent primaries"},
		{"sentinel failover client", []redis.UniversalClient{failover, a}, nil, "independent primaries"},
		{"max ttl that overflows the quarantine", []redis.UniversalClient{a}, []Option{WithMaxTTL(math.MaxInt64)}, "exceeds 24h0m0s"},
		{"max ttl above a day", []redis.UniversalClient{a}, []Option{WithMaxTTL(MaxMaxTTL + time.Millisecond)}, "exceeds 24h0m0s"},
		{"sub-millisecond max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(time.Second + time.Microsecond)}, "whole number of milliseconds"},
		{"same client twice", []redis.UniversalClient{a, a}, nil, "same client"},
		{"same address twice", []redis.UniversalClient{a, b}, nil, "both reach"},
		{"drift factor 1", []redis.UniversalClient{a}, []Option{WithDriftFactor(1)}, "factor"},
		{"negative drift factor", []redis.UniversalClient{a}, []Option{WithDriftFactor(-0.1)}, "factor"},
		{"nil retry", []redis.UniversalClient{a}, []Option{WithRetry(nil, 1)}, "nil delay"},
		{"negative attempts", []redis.UniversalClient{a}, []Option{WithRetry(DefaultRetry, -1)}, "maxAttempts"},
		{"zero node timeout", []redis.UniversalClient{a}, []Option{WithNodeTimeout(0)}, "WithNodeTimeout"},
		{"zero max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(0)}, "WithMaxTTL"},
		{"tiny max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(time.Millisecond)}, "no validity"},
		{"nil clock", []redis.UniversalClient{a}, []Option{WithClock(nil)}, "nil clock"},
		{"nil logger", []redis.UniversalClient{a}, []Option{WithLogger(nil)}, "nil logger"},
		{"nil option", []redis.UniversalClient{a}, []Option{nil}, "nil option"},
		{"zero max hold", []redis.UniversalClient{a}, []Option{WithMaxHold(0)}, "WithMaxHold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.nodes, tc.opts...)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, c)
		})
	}
}

// A deployment nobody has used cannot be told from one whose every node
// lost its data, so its nodes serve one quarantine from first use, after
// which Lock gets the lock without any extra call.
func TestNewDeploymentServesOneQuarantine(t *testing.T) {
	const maxTTL = 200 * time.Millisecond
	c, fs := newFakeUnadmitted(t, 5, WithMaxTTL(maxTTL))
	ctx := context.Background()
	start := time.Now()
	_, err := c.TryLock(ctx, "k", maxTTL)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonQuarantine, e.Reason)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	require.Positive(t, e.Wait, "no hint of when the quarantine ends")
	require.LessOrEqual(t, e.Wait, c.set.quarantine())

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "the new deployment never became usable")
	require.GreaterOrEqual(t, time.Since(start), c.set.quarantine(), "admitted before one quarantine had passed")
	require.NoError(t, l.Release(ctx))
	for i, f := range fs {
		// The lock needed three; the other two are admitted in the background.
		require.Eventually(t, func() bool { m, _ := f.Get(markerKey); return m == c.settings }, time.Second, time.Millisecond, "node %d not admitted", i)
	}
}

func TestBootstrapAdmitsANewDeploymentAtOnce(t *testing.T) {
	c, fs := newFakeUnadmitted(t, 5)
	ctx := context.Background()
	require.NoError(t, c.Bootstrap(ctx))
	require.NoError(t, c.Bootstrap(ctx), "Bootstrap is not idempotent")
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for _, f := range fs {
		m, _ := f.Get(markerKey)
		require.Equal(t, c.settings, m)
	}
}

func TestBootstrapRefusesUsedOrUnreachableNodes(t *testing.T) {
	ctx := context.Background()
	t.Run("quarantine in progress", func(t *testing.T) {
		c, fs := newFakeUnadmitted(t, 5, WithMaxTTL(time.Second))
		_, err := c.TryLock(ctx, "k", time.Second) // starts the quarantines
		require.ErrorIs(t, err, ErrNodeQuarantined)
		err = c.Bootstrap(ctx)
		require.ErrorIs(t, err, ErrNotNew)
		for i, f := range fs {
			_, ok := f.Get(markerKey)
			require.False(t, ok, "node %d admitted though Bootstrap refused", i)
		}
	})
	t.Run("other settings", func(t *testing.T) {
		c, fs := newFakeUnadmitted(t, 5)
		fs[3].set(markerKey, settings{nodes: 5, maxTTL: time.Second, factor: 0.01}.String(), 0)
		err := c.Bootstrap(ctx)
		require.ErrorIs(t, err, ErrConfigMismatch)
		_, ok := fs[0].Get(markerKey)
		require.False(t, ok, "one refusal must admit nothing")
	})
	t.Run("a node down", func(t *testing.T) {
		c, fs := newFakeUnadmitted(t, 5)
		fs[4].setErr(errors.New("connection refused"))
		err := c.Bootstrap(ctx)
		require.ErrorContains(t, err, "connection refused")
		_, ok := fs[0].Get(markerKey)
		require.False(t, ok, "Bootstrap must see every node before admitting any")
	})
}

// A client built with other settings than the deployment's gets a clear
// error, never a lock, and starts nothing on the nodes.
func TestOtherSettingsAreRefused(t *testing.T) {
	c, fs := newFake(t, 5, WithMaxTTL(time.Minute))
	ctx := context.Background()
	ns := make([]*node, len(fs))
	for i, f := range fs {
		ns[i] = &node{idx: i, name: fmt.Sprintf("other-%d", i), sc: f}
	}
	for _, opt := range []Option{WithMaxTTL(time.Second), WithDriftFactor(0.02)} {
		other, err := newClient(ns, []Option{opt})
		require.NoError(t, err)
		_, err = other.TryLock(ctx, "k", 500*time.Millisecond)
		require.ErrorIs(t, err, ErrConfigMismatch)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, c.settings, ce.Deployment)
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = other.Lock(lctx, "k", 500*time.Millisecond)
		cancel()
		require.ErrorIs(t, err, ErrConfigMismatch, "Lock kept waiting on a configuration error")
		require.NoError(t, other.Close())
	}
	for _, f := range fs {
		_, ok := f.Get("k")
		require.False(t, ok, "a refused client left its key behind")
	}
}

func TestSecondHolderIsRefused(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	held := map[int]bool{}
	for i, f := range fs {
		if v, ok := f.Get("k"); ok && v == l.value {
			held[i] = true
		}
	}
	require.GreaterOrEqual(t, len(held), 3)
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, ErrNodeHeld)
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	require.True(t, strings.HasPrefix(ne.Addr, "fake-"), "NodeError.Addr = %q", ne.Addr)
	// The failed attempt must not have disturbed the holder's keys.
	for i := range held {
		v, ok := fs[i].Get("k")
		require.True(t, ok, "node %d lost the key", i)
		require.Equal(t, l.value, v, "node %d", i)
	}
}

func TestFailedAttemptLeavesNothingBehind(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second) // admit the nodes
	require.NoError(t, err)
	// Another owner holds the key on three nodes: we can win only two.
	for _, f := range fs[2:] {
		f.set("k", "other", time.Minute)
	}
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	// The round is decided by the three refusals; a node that had not
	// answered by then is cleaned up in the background, so its delete may
	// land just after TryLock returns. It must land well within the ttl.
	for i, f := range fs[:2] {
		require.Eventually(t, func() bool {
			_, ok := f.Get("k")
			return !ok
		}, 500*time.Millisecond, time.Millisecond, "node %d kept the failed attempt's key", i)
	}
	for i, f := range fs[2:] {
		v, _ := f.Get("k")
		require.Equal(t, "other", v, "node %d: the other owner's key was touched", i+2)
	}
}

func TestMinorityFrozenDoesNotDelay(t *testing.T) {
	c, fs := newFake(t, 5, WithNodeTimeout(2*time.Second))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	fs[3].freeze()
	fs[4].freeze()
	start := time.Now()
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, time.Second, "TryLock waited for frozen nodes")
	start = time.Now()
	require.NoError(t, l.Release(ctx))
	require.Less(t, time.Since(start), time.Second, "Release waited for frozen nodes")
}

func TestMajorityFrozenFailsWithinNodeTimeout(t *testing.T) {
	c, fs := newFake(t, 5, WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	for _, f := range fs[2:] {
		f.freeze()
	}
	start := time.Now()
	_, err = c.TryLock(ctx, "k", 10*time.Second)
	took := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, 200*time.Millisecond, "TryLock took %v, want within twice the node timeout", took)
	for i, f := range fs[:2] {
		_, ok := f.Get("k")
		require.False(t, ok, "node %d kept the failed attempt's key", i)
	}
}

func TestNodeErrorsAreReported(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	boom := errors.New("connection refused")
	for _, f := range fs[:3] {
		f.setErr(boom)
	}
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, boom)
	seen := map[int]bool{}
	for _, e := range flatten(err) {
		var ne *NodeError
		if errors.As(e, &ne) && errors.Is(ne, boom) {
			seen[ne.Node] = true
		}
	}
	require.Equal(t, map[int]bool{0: true, 1: true, 2: true}, seen)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func TestValidityUsedUp(t *testing.T) {
	c, fs := newFake(t, 5, WithNodeTimeout(time.Second))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	for _, f := range fs {
		f.delay.Store(int64(60 * time.Millisecond))
	}
	_, err = c.TryLock(ctx, "k", 50*time.Millisecond)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "validity used up")
	for _, f := range fs {
		f.delay.Store(0)
	}
	// The keys the late round set are released, not left to expire.
	require.Eventually(t, func() bool {
		for _, f := range fs {
			if _, ok := f.Get("k"); ok {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond)
}

func TestExtendAndRelease(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", 100*time.Millisecond)
	require.NoError(t, err)
	d0 := l.Deadline()
	require.NoError(t, l.Extend(ctx, time.Second))
	require.True(t, l.Deadline().After(d0.Add(500*time.Millisecond)), "deadline %v not moved from %v", l.Deadline(), d0)
	require.NoError(t, l.Release(ctx))
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed by Release")
	}
	require.ErrorIs(t, l.Release(ctx), ErrNotHeld)
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	requireGone(t, fs, "k")
}

// requireGone waits for key to be gone from every node: Release returns at
// a majority and lets slower nodes finish in the background.
func requireGone(t *testing.T, fs []*fakeNode, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, f := range fs {
			if _, ok := f.Get(key); ok {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "a node kept %q after release", key)
}

func TestExtendNeverResurrects(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", 30*time.Millisecond)
	require.NoError(t, err)
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed at the end of validity")
	}
	time.Sleep(10 * time.Millisecond) // past the key's expiry on the nodes too
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	for i, f := range fs {
		_, ok := f.Get("k")
		require.False(t, ok, "Extend brought the key back on node %d", i)
	}
}

func TestExtendAfterTakeover(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	for _, f := range fs[:3] { // the lease is taken over on a majority
		f.set("k", "thief", 0)
	}
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after the lease was found lost")
	}
	for i, f := range fs[:3] {
		v, _ := f.Get("k")
		require.Equal(t, "thief", v, "node %d", i)
	}
}

func TestLockWakesOnLocalRelease(t *testing.T) {
	// A 10s retry delay: only the release notification can explain a
	// quick hand-off.
	c, _ := newFake(t, 5, WithRetry(func(int) time.Duration { return 10 * time.Second }, 0))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", 5*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l2, err := c.Lock(ctx, "k", 5*time.Second)
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter fail and subscribe
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		require.Less(t, time.Since(released), 2*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

func TestLockCancelled(t *testing.T) {
	c, _ := newFake(t, 5)
	ctx := context.Background()
	_, err := c.TryLock(ctx, "k", 5*time.Second)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Lock(cctx, "k", 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestLockRetryPolicyGivesUp(t *testing.T) {
	c, fs := newFake(t, 5, WithRetry(func(int) time.Duration { return time.Millisecond }, 3))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "k", 5*time.Second)
	require.NoError(t, err)
	before := fs[0].calls.Load()
	_, err = c.Lock(ctx, "k", 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	// Three attempts, each one acquire call (and one cleanup call) per node.
	require.LessOrEqual(t, fs[0].calls.Load()-before, int64(6))
}

func TestDoCancelsWhenLeaseLost(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	var sawCancel bool
	err := c.Do(ctx, "k", 90*time.Millisecond, func(ctx context.Context, l *Lease) error {
		for _, f := range fs { // someone takes the lock over everywhere
			f.set("k", "thief", 0)
		}
		select {
		case <-ctx.Done():
			sawCancel = true
			return ctx.Err()
		case <-time.After(2 * time.Second):
			return errors.New("fn's ctx outlived the lease")
		}
	})
	require.True(t, sawCancel)
	require.ErrorIs(t, err, ErrNotHeld)
	require.NotErrorIs(t, err, ErrMaxHold)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDoKeepsLeaseAlive(t *testing.T) {
	// Node timeouts with room for a loaded machine (the default, 5% of
	// the ttl, would be 12 ms); the section spans several renewals.
	c, fs := newFake(t, 5, WithNodeTimeout(60*time.Millisecond))
	ctx := context.Background()
	err := c.Do(ctx, "k", 240*time.Millisecond, func(ctx context.Context, l *Lease) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease ended during a 900ms section with a 240ms ttl: %w", context.Cause(ctx))
		case <-time.After(900 * time.Millisecond):
		}
		return nil
	})
	require.NoError(t, err)
	requireGone(t, fs, "k")
}

func TestDoStopsExtendingAfterMaxHold(t *testing.T) {
	// Generous node timeouts: extends must not fail on a loaded machine.
	c, _ := newFake(t, 5, WithMaxHold(600*time.Millisecond), WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	start := time.Now()
	err := c.Do(ctx, "k", 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.ErrorIs(t, err, ErrMaxHold)
	took := time.Since(start)
	require.Greater(t, took, 600*time.Millisecond, "extending stopped before the max hold")
	require.Less(t, took, 5*time.Second, "extending did not stop at the max hold")
}

func TestFencingTokensIncrease(t *testing.T) {
	c, fs := newFake(t, 5, WithFencing())
	ctx := context.Background()
	var last uint64
	for i := range 20 {
		// Push a minority's fence far ahead, as failed attempts can.
		if i == 10 {
			fs[4].set(fenceKey("k"), fmt.Sprint(last+1_000_000), 0)
		}
		l, err := c.TryLock(ctx, "k", time.Second)
		require.NoError(t, err)
		require.Greater(t, l.FencingToken(), last, "attempt %d", i)
		last = l.FencingToken()
		require.NoError(t, l.Release(ctx))
	}
}

func TestPlainLeaseHasNoToken(t *testing.T) {
	c, _ := newFake(t, 5)
	l, err := c.TryLock(context.Background(), "k", time.Second)
	require.NoError(t, err)
	require.Zero(t, l.FencingToken())
}

// wipe empties a fake node, as a restart without persistence does.
func wipe(f *fakeNode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals = map[string]string{}
	f.hashes = map[string]map[string]string{}
	f.exp = map[string]time.Time{}
}

func TestRestartQuarantine(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) {
			opts := []Option{WithMaxTTL(300 * time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil)))}
			if !quarantine {
				opts = append(opts, WithoutRestartQuarantine())
			}
			c, fs := newFake(t, 5, opts...)
			ctx := context.Background()
			_, err := c.TryLock(ctx, "warm", 300*time.Millisecond) // admit everyone
			require.NoError(t, err)
			// Wait for the warm-up's stragglers, so that the counts below
			// see only A's calls.
			require.Eventually(t, func() bool {
				for _, f := range fs {
					if n := f.calls.Load(); n == 0 || f.ended.Load() != n {
						return false
					}
				}
				return true
			}, time.Second, time.Millisecond)
			// A holds the lock on exactly nodes 0, 1, 2.
			boom := errors.New("unreachable")
			fs[3].setErr(boom)
			fs[4].setErr(boom)
			before3, before4 := fs[3].calls.Load(), fs[4].calls.Load()
			a, err := c.TryLock(ctx, "k", 300*time.Millisecond)
			require.NoError(t, err)
			// Let the refused calls to nodes 3 and 4 finish before healing
			// them, or a late call would take the key there after all.
			require.Eventually(t, func() bool {
				settled := func(f *fakeNode, before int64) bool {
					calls := f.calls.Load()
					return calls > before && f.ended.Load() == calls
				}
				return settled(fs[3], before3) && settled(fs[4], before4)
			}, time.Second, time.Millisecond)
			fs[3].setErr(nil)
			fs[4].setErr(nil)
			// Node 2 restarts empty; A's lock is still valid.
			wipe(fs[2])
			b, err := c.TryLock(ctx, "k", 300*time.Millisecond)
			if !quarantine {
				require.NoError(t, err, "without quarantine the restarted node votes again")
				require.True(t, time.Now().Before(a.Deadline()), "test too slow to show the double grant")
				return
			}
			require.ErrorIs(t, err, ErrNotObtained, "double grant: %v", b)
			require.ErrorIs(t, err, ErrNodeQuarantined)
			// Once A's lock has expired everywhere and the quarantine is
			// over, the node votes again.
			require.Eventually(t, func() bool {
				l, err := c.TryLock(ctx, "k", 300*time.Millisecond)
				if err != nil {
					return false
				}
				_ = l.Release(ctx)
				return true
			}, 2*time.Second, 20*time.Millisecond)
			require.Eventually(t, func() bool {
				_, ok := fs[2].Get(markerKey)
				return ok
			}, 2*time.Second, 10*time.Millisecond, "node 2 not re-admitted after its quarantine")
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestSingleNodeServesOneQuarantine(t *testing.T) {
	c, fs := newFakeUnadmitted(t, 1, WithMaxTTL(100*time.Millisecond))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "k", 100*time.Millisecond)
	require.ErrorIs(t, err, ErrNodeQuarantined, "a lone node cannot be known to be new")
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, "k", 100*time.Millisecond)
	require.NoError(t, err, "the lone node was never admitted")
	require.NoError(t, l.Release(ctx))
	_, ok := fs[0].Get(markerKey)
	require.True(t, ok)
}

func TestFailingAttemptDoesNotWaitForNodesThatMissedTheirDeadline(t *testing.T) {
	c, fs := newFake(t, 5, WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	fs[3].freeze()
	fs[4].freeze()
	fs[0].set("k", "other", time.Minute)

	start := time.Now()
	_, err = c.TryLock(ctx, "k", 10*time.Second)
	first := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.GreaterOrEqual(t, first, 300*time.Millisecond, "the first attempt cannot know the frozen nodes are gone")

	start = time.Now()
	_, err = c.TryLock(ctx, "k", 10*time.Second)
	second := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "missed its previous deadline")
	require.Less(t, second, 150*time.Millisecond, "the second attempt waited for nodes that had missed their deadline")

	// Once they answer again they count as before.
	fs[3].thaw()
	fs[4].thaw()
	fs[0].mu.Lock()
	delete(fs[0].vals, "k")
	fs[0].mu.Unlock()
	require.Eventually(t, func() bool {
		l, err := c.TryLock(ctx, "k2", 10*time.Second)
		if err != nil {
			return false
		}
		_ = l.Release(ctx)
		return !fs[3].missed() && !fs[4].missed()
	}, 3*time.Second, 20*time.Millisecond)
}

// A quarantine started by one client can be finished by another: short-lived
// clients (quorumlock run) must not each restart the wait.
func TestQuarantineSurvivesTheClientThatStartedIt(t *testing.T) {
	const maxTTL = 200 * time.Millisecond
	c1, fs := newFake(t, 5, WithMaxTTL(maxTTL))
	ctx := context.Background()
	_, err := c1.TryLock(ctx, "warm", maxTTL)
	require.NoError(t, err)
	wipe(fs[2])
	// Nodes 3 and 4 are held by someone else: every lock needs node 2.
	for _, f := range fs[3:] {
		f.set("k", "other", time.Minute)
	}
	_, err = c1.TryLock(ctx, "k", maxTTL) // finds node 2 empty: quarantine starts
	require.ErrorIs(t, err, ErrNodeQuarantined)
	require.Eventually(t, func() bool {
		fs[2].mu.Lock()
		defer fs[2].mu.Unlock()
		return fs[2].exists(pendingKey)
	}, time.Second, time.Millisecond)
	require.NoError(t, c1.Close())
	_, stillThere := fs[2].Get(markerKey)
	require.False(t, stillThere, "node 2 admitted before its quarantine ended")

	time.Sleep(maxTTL + 50*time.Millisecond)
	ns := make([]*node, len(fs))
	for i, f := range fs {
		ns[i] = &node{idx: i, name: fmt.Sprintf("fake-%d", i), sc: f}
	}
	c2, err := newClient(ns, []Option{WithMaxTTL(maxTTL)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	_, err = c2.TryLock(ctx, "k", maxTTL)
	require.NoError(t, err, "a new client did not finish the quarantine it found already served")
	_, ok := fs[2].Get(markerKey)
	require.True(t, ok)
}

// Eight goroutines on one Client queue in memory instead of splitting the
// nodes between them: an acquisition costs about one acquire and one
// release round (10 calls on 5 nodes), not a storm of failed attempts.
func TestLocalWaitersQueue(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond) // let the warm-up's background calls finish
	before := totalCalls(fs)
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	var inside atomic.Int32
	for range workers {
		wg.Go(func() {
			for range rounds {
				err := c.Do(ctx, "k", time.Second, func(context.Context, *Lease) error {
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		for _, f := range fs {
			if f.ended.Load() != f.calls.Load() {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond)
	perAcq := float64(totalCalls(fs)-before) / (workers * rounds)
	t.Logf("%.1f node calls per acquisition", perAcq)
	require.Less(t, perAcq, 15.0, "local waiters are not queueing")
}

func TestFencingTokenStaysABigint(t *testing.T) {
	c, fs := newFake(t, 5, WithFencing())
	ctx := context.Background()
	setFence := func(v string) {
		for _, f := range fs {
			f.set(fenceKey("k"), v, 0)
		}
	}
	setFence("9223372036854775806") // MaxInt64 - 1: one more token fits
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxInt64), l.FencingToken())
	require.NoError(t, l.Release(ctx))
	requireGone(t, fs, "k")

	_, err = c.TryLock(ctx, "k", time.Second) // the fence is now MaxInt64
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "largest PostgreSQL bigint")
	requireGone(t, fs, "k") // nothing left behind
}

// A fencing commit that reaches fewer than a majority makes the attempt
// fail and clean up: the token would not be ordered.
func TestFencingCommitFailureFailsTheAttempt(t *testing.T) {
	c, fs := newFake(t, 5, WithFencing())
	ctx := context.Background()
	_, err := c.TryLock(ctx, "warm", time.Second)
	require.NoError(t, err)
	boom := errors.New("commit refused")
	for _, f := range fs[:3] {
		f.failScript("commit", boom)
	}
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "fence commit")
	requireGone(t, fs, "k")
	for _, f := range fs[:3] {
		f.failScript("commit", nil)
	}
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	require.NotZero(t, l.FencingToken())
}

// With a majority unreachable, Extend and Release report the node errors,
// not ErrNotHeld, and Extend keeps the lease valid until its old deadline.
func TestExtendAndReleaseWithMajorityDown(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	deadline := l.Deadline()
	boom := errors.New("connection refused")
	for _, f := range fs[:3] {
		f.setErr(boom)
	}
	err = l.Extend(ctx, time.Second)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrNotHeld)
	require.Equal(t, deadline, l.Deadline())
	select {
	case <-l.Done():
		t.Fatal("a failed Extend ended a lease that may still be held")
	default:
	}
	err = l.Release(ctx)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrNotHeld)
	require.ErrorContains(t, err, "nodes; the rest expire with the ttl")
}

// The time floor alone keeps tokens increasing when the only node shared by
// two holders' majorities lost its fence (restart without persistence).
// The quarantine is off here so the restarted node votes at once and only
// the floor stands between B and a token below A's.
func TestTimeFloorSurvivesLostFence(t *testing.T) {
	c, fs := newFake(t, 5, WithFencing(), WithoutRestartQuarantine())
	ctx := context.Background()
	boom := errors.New("unreachable")
	fs[3].setErr(boom)
	fs[4].setErr(boom)
	a, err := c.TryLock(ctx, "k", time.Second) // commits on nodes 0, 1, 2 only
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	fs[3].setErr(nil)
	fs[4].setErr(nil)
	wipe(fs[2]) // node 2 forgets its fence
	fs[0].setErr(boom)
	fs[1].setErr(boom)
	b, err := c.TryLock(ctx, "k", time.Second) // reads fences only on 2, 3, 4: all empty
	require.NoError(t, err)
	require.Greater(t, b.FencingToken(), a.FencingToken(), "token inversion after a lost fence")
}

// Unreachable nodes do not make New fail (a majority may come up later),
// and a lock over them fails fast with every node's cause.
func TestUnreachableNodes(t *testing.T) {
	var nodes []redis.UniversalClient
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody listens on once closed
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	c, err := New(nodes, WithProbeTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	start := time.Now()
	_, err = c.TryLock(context.Background(), "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.Less(t, time.Since(start), 2*time.Second)
	// go-redis retries a refused dial for about 400 ms, longer than the
	// 50 ms per-node timeout: each node shows up as timed out or refused.
	failed := map[int]bool{}
	for _, e := range flatten(err) {
		var ne *NodeError
		var oe *net.OpError
		if errors.As(e, &ne) && (errors.As(ne, &oe) || errors.Is(ne, context.DeadlineExceeded)) {
			failed[ne.Node] = true
		}
	}
	require.Len(t, failed, 5, "want every node's cause in %v", err)
}

// A lease is valid for ttl - drift from the START of the round that
// granted or extended it: counting from its end would overstate the
// validity by the round's duration, which is exactly what a slow node or
// a paused client stretches.
func TestDeadlinesCountFromTheStartOfTheirRound(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fenced), func(t *testing.T) {
			opts := []Option{WithNodeTimeout(2 * time.Second)}
			if fenced {
				opts = append(opts, WithFencing())
			}
			c, fs := newFake(t, 5, opts...)
			const ttl, slow = 3 * time.Second, 150 * time.Millisecond
			for _, f := range fs {
				f.delay.Store(int64(slow))
			}
			ctx := context.Background()
			margin := 50 * time.Millisecond // reading the clock around the call
			before := time.Now()
			l, err := c.TryLock(ctx, "k", ttl)
			require.NoError(t, err)
			require.GreaterOrEqual(t, time.Since(before), slow, "the round was not slow")
			require.WithinDuration(t, before.Add(ttl-drift.Drift(ttl, c.cfg.factor)), l.Deadline(), margin,
				"the acquire deadline is not counted from the start of the round")

			before = time.Now()
			require.NoError(t, l.Extend(ctx, ttl))
			require.WithinDuration(t, before.Add(ttl-drift.Drift(ttl, c.cfg.factor)), l.Deadline(), margin,
				"the extend deadline is not counted from the start of its round")
		})
	}
}

// The first admission of a deployment needs every node to answer: with a
// node down, nothing shows whether it carries other settings, and the
// deployment waits (Bootstrap, or the node coming back, ends the wait).
func TestFirstAdmissionNeedsEveryPeer(t *testing.T) {
	const maxTTL = 100 * time.Millisecond
	c, fs := newFakeUnadmitted(t, 5, WithMaxTTL(maxTTL))
	ctx := context.Background()
	fs[4].setErr(errors.New("connection refused"))
	_, err := c.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	time.Sleep(3 * maxTTL)
	for i, f := range fs[:4] {
		_, ok := f.Get(markerKey)
		require.False(t, ok, "node %d admitted while a peer could not be asked", i)
	}
	fs[4].setErr(nil)
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "the deployment was not admitted once every node answered")
	require.NoError(t, l.Release(ctx))
}

// A quarantine another client started with other settings blocks the
// first admission: two fleets configured differently never both admit.
func TestFirstAdmissionRefusesOtherSettingsInProgress(t *testing.T) {
	const maxTTL = 100 * time.Millisecond
	c, fs := newFakeUnadmitted(t, 5, WithMaxTTL(maxTTL))
	ctx := context.Background()
	other := settings{nodes: 5, maxTTL: 2 * maxTTL, factor: 0.01}
	fs[3].mu.Lock()
	fs[3].hashes[pendingKey] = map[string]string{"id": "x", "stamp": "0", "settings": other.String(), "quarantine": "1"}
	fs[3].mu.Unlock()
	_, err := c.TryLock(ctx, "k", maxTTL)
	require.Error(t, err)
	time.Sleep(3 * maxTTL)
	for i, f := range fs {
		_, ok := f.Get(markerKey)
		require.False(t, ok, "node %d admitted while node 3 is being admitted with other settings", i)
	}
	_, err = c.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
}

func TestQuarantineIsMaxTTLPlusItsDrift(t *testing.T) {
	q, err := Quarantine(time.Second, 0.01)
	require.NoError(t, err)
	require.Equal(t, time.Second+12*time.Millisecond, q)
	q, err = Quarantine(MaxMaxTTL, 0.5)
	require.NoError(t, err)
	require.Equal(t, MaxMaxTTL+MaxMaxTTL/2+2*time.Millisecond, q)
	_, err = Quarantine(MaxMaxTTL+time.Millisecond, 0.01)
	require.Error(t, err)
	_, err = Quarantine(time.Second, 1)
	require.Error(t, err)
}

// Do's renewals are batched: many leases on one Client cost each node a
// bounded number of extend calls per renewal period, not one per lease,
// and no lease is lost.
func TestDoRenewsManyLeasesInBatches(t *testing.T) {
	c, fs := newFake(t, 5)
	ctx := context.Background()
	// A ttl with room for a loaded machine under -race: 200 leases and
	// their renewals share two cores with whatever else runs.
	const leases, ttl, hold = 200, 600 * time.Millisecond, 1800 * time.Millisecond
	countExtends := func() int64 {
		var n int64
		for _, f := range fs {
			f.mu.Lock()
			n += f.extendCalls
			f.mu.Unlock()
		}
		return n
	}
	held := make(chan struct{})
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(leases)
	errs := make(chan error, leases)
	for i := range leases {
		wg.Go(func() {
			errs <- c.Do(ctx, fmt.Sprintf("k%d", i), ttl, func(ctx context.Context, _ *Lease) error {
				ready.Done()
				select {
				case <-held:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
		})
	}
	ready.Wait()
	before := countExtends()
	time.Sleep(hold)
	during := countExtends() - before
	close(held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a lease was lost while its fn ran")
	}
	periods := float64(hold) / float64(ttl/3)
	perNodePerPeriod := float64(during) / 5 / periods
	t.Logf("%d extend calls on 5 nodes in %v for %d leases: %.1f per node per renewal period", during, hold, leases, perNodePerPeriod)
	require.Positive(t, during, "nothing was renewed")
	require.LessOrEqual(t, perNodePerPeriod, 6.0, "renewals are not batched")
}

// A shorter Extend after a longer one leaves the longer expiry on the
// nodes (the script never shortens a key), so the lease keeps the later
// deadline too instead of reporting less than it holds.
func TestExtendNeverShortensTheDeadline(t *testing.T) {
	c, fs := newFake(t, 5, WithMaxTTL(time.Minute))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, 30*time.Second))
	long := l.Deadline()
	require.NoError(t, l.Extend(ctx, time.Second))
	require.Equal(t, long, l.Deadline(), "a shorter extend moved the deadline back")
	// What the lease promises must be held by a majority. (A node whose
	// acquire arrived after the extends holds only the first ttl: it was
	// not part of the majorities the deadline counts on.)
	var longer int
	for _, f := range fs {
		f.mu.Lock()
		if f.pttl("k") > 20_000 {
			longer++
		}
		f.mu.Unlock()
	}
	require.GreaterOrEqual(t, longer, 3, "the majority lost the longer expiry")
}
