package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// cluster is five real redis-server primaries with default go-redis
// clients, as a user would build them.
type cluster struct {
	nodes   []*testenv.RedisNode
	clients []redis.UniversalClient
	booted  bool
}

func newCluster(t *testing.T, opts ...testenv.RedisOption) *cluster {
	t.Helper()
	nodes := testenv.RedisNodes(t, 5, opts...)
	return &cluster{nodes: nodes, clients: testenv.Clients(t, nodes)}
}

// client builds a redlock.Client over the cluster, closed at cleanup. The
// first client of a cluster bootstraps it, as an operator would a new
// deployment; see rawClient.
func (cl *cluster) client(t *testing.T, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c := cl.rawClient(t, opts...)
	if !cl.booted {
		require.NoError(t, c.Bootstrap(context.Background()))
		cl.booted = true
	}
	return c
}

// rawClient builds a redlock.Client without bootstrapping anything.
func (cl *cluster) rawClient(t *testing.T, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(cl.clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// freeze SIGSTOPs the given nodes until the test ends (or thaw).
func (cl *cluster) freeze(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.nodes[i].Pause())
		t.Cleanup(func() { _ = cl.nodes[i].Resume() })
	}
}

func (cl *cluster) thaw(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.nodes[i].Resume())
	}
}

// holders counts the nodes whose key holds a value, and returns the values.
func (cl *cluster) values(t *testing.T, idx []int, key string) []string {
	t.Helper()
	var out []string
	for _, i := range idx {
		v, err := cl.clients[i].Get(context.Background(), key).Result()
		if errors.Is(err, redis.Nil) {
			out = append(out, "")
			continue
		}
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

func TestIntegrationMutualExclusion(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t)
	key := testenv.Key(t)
	const workers, rounds = 8, 25
	var inside, maxInside, total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range rounds {
				err := c.Do(context.Background(), key, 2*time.Second, func(ctx context.Context, l *redlock.Lease) error {
					n := inside.Add(1)
					for {
						m := maxInside.Load()
						if n <= m || maxInside.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(200 * time.Microsecond)
					total.Add(1)
					inside.Add(-1)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), maxInside.Load(), "two holders inside the critical section at once")
	require.Equal(t, int64(workers*rounds), total.Load())
}

func TestIntegrationTwoFrozenStillGranted(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t)
	ctx := context.Background()
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second) // admit the nodes
	require.NoError(t, err)
	cl.freeze(t, 3, 4)
	key := testenv.Key(t)
	for range 5 {
		start := time.Now()
		l, err := c.TryLock(ctx, key, 10*time.Second)
		took := time.Since(start)
		require.NoError(t, err)
		// The clients are at go-redis defaults (5s read timeout, ctx
		// deadlines ignored): waiting for a frozen node would take seconds.
		require.Less(t, took, time.Second, "TryLock waited for the frozen nodes")
		start = time.Now()
		require.NoError(t, l.Release(ctx))
		require.Less(t, time.Since(start), time.Second, "Release waited for the frozen nodes")
		require.Equal(t, []string{"", "", ""}, cl.values(t, []int{0, 1, 2}, key))
	}
}

func TestIntegrationThreeFrozenFailsFast(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t, redlock.WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	cl.freeze(t, 2, 3, 4)
	key := testenv.Key(t)
	start := time.Now()
	_, err = c.TryLock(ctx, key, 10*time.Second)
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	var ne *redlock.NodeError
	require.ErrorAs(t, err, &ne)
	require.Less(t, took, 2*time.Second, "TryLock took %v with a 200ms node timeout", took)
	// Nothing left behind on the nodes that answered.
	require.Equal(t, []string{"", ""}, cl.values(t, []int{0, 1}, key))

	// Lock gives up when its ctx does, not minutes later.
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.Lock(lctx, key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	cl.thaw(t, 2, 3, 4)
}

func TestIntegrationExtendExpiryRelease(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 500*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, key, l.Key())
	all := []int{0, 1, 2, 3, 4}
	// TryLock returns at a majority; the key sits under its exact name.
	held, holder := 0, -1
	var first string
	for i, v := range cl.values(t, all, key) {
		if v == "" {
			continue
		}
		if first == "" {
			first, holder = v, i
		}
		require.Equal(t, first, v, "node %d holds another value", i)
		held++
	}
	require.GreaterOrEqual(t, held, 3)
	// A migration-era client using plain SET NX on the same key is excluded.
	ok, err := cl.clients[holder].SetNX(ctx, key, "redsync-style", time.Second).Result()
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, l.Extend(ctx, 3*time.Second))
	extended := 0
	for _, rc := range cl.clients {
		if pttl, err := rc.PTTL(ctx, key).Result(); err == nil && pttl > 2*time.Second {
			extended++
		}
	}
	require.GreaterOrEqual(t, extended, 3, "Extend returned before a majority had the new ttl")

	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool {
		for _, v := range cl.values(t, all, key) {
			if v != "" {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrNotHeld)

	// Expiry: Done closes, and Extend does not bring the key back.
	l, err = c.TryLock(ctx, key, 100*time.Millisecond)
	require.NoError(t, err)
	<-l.Done()
	time.Sleep(20 * time.Millisecond)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrNotHeld)
	require.Equal(t, []string{"", "", "", "", ""}, cl.values(t, all, key))
}

func TestIntegrationDoLosesLease(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t)
	key := testenv.Key(t)
	err := c.Do(context.Background(), key, 300*time.Millisecond, func(ctx context.Context, l *redlock.Lease) error {
		for _, rc := range cl.clients { // an operator deletes the lock everywhere
			require.NoError(t, rc.Del(context.Background(), key).Err())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * time.Second):
			return errors.New("fn kept running after its lease was lost")
		}
	})
	require.ErrorIs(t, err, redlock.ErrNotHeld)
}

func TestIntegrationLockHandOffAndCancel(t *testing.T) {
	cl := newCluster(t)
	// Polling alone would take 10s: only the release notification, sent
	// through Pub/Sub by another Client, can hand over quickly.
	holder := cl.client(t)
	waiter := cl.client(t, redlock.WithRetry(func(int) time.Duration { return 10 * time.Second }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		l2, err := waiter.Lock(ctx, key, 20*time.Second)
		if err == nil {
			got <- time.Now()
			_ = l2.Release(ctx)
		}
		close(got)
	}()
	time.Sleep(300 * time.Millisecond) // the waiter fails, subscribes, waits
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	select {
	case at, ok := <-got:
		require.True(t, ok, "waiter failed")
		require.Less(t, at.Sub(released), 3*time.Second, "hand-off waited for the poll interval")
		_, open := <-got // closed once the waiter has released again
		require.False(t, open)
	case <-time.After(8 * time.Second):
		t.Fatal("waiter was not woken by the release")
	}

	// Cancellation: the error carries both causes.
	_, err = holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = waiter.Lock(cctx, key, 20*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.Canceled)
}

func TestIntegrationNewRejectsSameServerTwice(t *testing.T) {
	node := testenv.Redis(t)
	a := node.Client(t)
	// A second client that reaches the same server under another name.
	b := redis.NewClient(&redis.Options{
		Addr: "alias.invalid:6379",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, node.Addr())
		},
	})
	t.Cleanup(func() { _ = b.Close() })
	c, err := redlock.New([]redis.UniversalClient{a, b})
	require.ErrorContains(t, err, "same Redis server")
	require.Nil(t, c)
}

// TestIntegrationRestartQuarantine is the Redlock spec's own counterexample:
// A holds exactly nodes 0, 1, 2; node 2 is killed and restarts empty; B asks
// nodes 2, 3, 4. Without the quarantine B is granted while A still holds.
func TestIntegrationRestartQuarantine(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) {
			cl := newCluster(t)
			const ttl = 3 * time.Second
			opts := []redlock.Option{redlock.WithMaxTTL(ttl)}
			if !quarantine {
				opts = append(opts, redlock.WithoutRestartQuarantine())
			}
			c := cl.client(t, opts...)
			ctx := context.Background()
			_, err := c.TryLock(ctx, testenv.Key(t), time.Second) // admit the nodes
			require.NoError(t, err)
			key := testenv.Key(t)
			// Someone else briefly holds nodes 3 and 4, so A wins exactly 0-2.
			for _, i := range []int{3, 4} {
				require.NoError(t, cl.clients[i].Set(ctx, key, "other", 400*time.Millisecond).Err())
			}
			a, err := c.TryLock(ctx, key, ttl)
			require.NoError(t, err)
			aVal := cl.values(t, []int{0}, key)[0]
			require.NotEmpty(t, aVal)
			require.Equal(t, []string{aVal, aVal, aVal}, cl.values(t, []int{0, 1, 2}, key))
			require.NoError(t, cl.nodes[2].Kill())
			require.NoError(t, cl.nodes[2].Restart(ctx))
			time.Sleep(500 * time.Millisecond) // the other owner's keys expire
			b, err := c.TryLock(ctx, key, ttl)
			if !quarantine {
				require.NoError(t, err, "expected the unsafe double grant without quarantine")
				require.True(t, time.Now().Before(a.Deadline()), "A's lease ended before the double grant: test too slow")
				// The double grant, on the nodes: A still holds 0 and 1, B
				// (which could only win 2, 3 and 4) holds those three.
				require.Equal(t, []string{aVal, aVal}, cl.values(t, []int{0, 1}, key))
				bVals := cl.values(t, []int{2, 3, 4}, key)
				require.NotEqual(t, aVal, bVals[0])
				require.Equal(t, []string{bVals[0], bVals[0], bVals[0]}, bVals)
				require.NoError(t, b.Release(ctx))
				return
			}
			require.ErrorIs(t, err, redlock.ErrNotObtained, "double grant while A holds the lock")
			require.ErrorIs(t, err, redlock.ErrNodeQuarantined)
			// A now holds only nodes 0 and 1, so its Release reports that
			// a majority no longer has its value.
			require.ErrorIs(t, a.Release(ctx), redlock.ErrNotHeld)
			// After the quarantine the restarted node votes again.
			require.Eventually(t, func() bool {
				ks, err := c.Inspect(ctx, key)
				return err == nil && ks.Nodes[2].Admission == redlock.AdmissionAdmitted
			}, 3*ttl, 50*time.Millisecond, "node 2 never re-admitted")
		})
	}
}

// TestIntegrationFencingTokens checks that tokens strictly increase in
// grant order under contention while random minorities are frozen, and
// across a kill -9 and empty restart of a node.
func TestIntegrationFencingTokens(t *testing.T) {
	cl := newCluster(t)
	const ttl = time.Second
	c := cl.client(t, redlock.WithFencing(), redlock.WithMaxTTL(ttl))
	ctx := context.Background()
	key := testenv.Key(t)

	var mu sync.Mutex
	var tokens []uint64
	var inside atomic.Int32
	run := func(n int) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range n {
					err := c.Do(ctx, key, ttl, func(ctx context.Context, l *redlock.Lease) error {
						if inside.Add(1) != 1 {
							t.Error("two holders at once")
						}
						defer inside.Add(-1)
						mu.Lock()
						tokens = append(tokens, l.FencingToken())
						mu.Unlock()
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
	}
	run(10)
	for _, minority := range [][]int{{0, 1}, {3}, {2, 4}} {
		cl.freeze(t, minority...)
		run(5)
		cl.thaw(t, minority...)
	}
	require.NoError(t, cl.nodes[1].Kill())
	require.NoError(t, cl.nodes[1].Restart(ctx))
	run(10)
	require.Len(t, tokens, 4*(10+15+10))
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "token %d not above its predecessor", i)
	}
	require.LessOrEqual(t, tokens[len(tokens)-1], uint64(1<<63-1), "token does not fit a bigint")
}

// Scripts go out as EVALSHA with prebuilt arguments; a node whose script
// cache was emptied (a restart, SCRIPT FLUSH) answers NOSCRIPT and gets the
// source instead.
func TestIntegrationScriptCacheFlushed(t *testing.T) {
	cl := newCluster(t)
	c := cl.client(t, redlock.WithFencing())
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	for _, rc := range cl.clients {
		require.NoError(t, rc.ScriptFlush(ctx).Err())
	}
	require.NoError(t, l.Extend(ctx, 2*time.Second))
	require.NoError(t, l.Release(ctx))
	for _, rc := range cl.clients {
		require.NoError(t, rc.ScriptFlush(ctx).Err())
	}
	l, err = c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.Positive(t, l.FencingToken())
	require.NoError(t, l.Release(ctx))
}

// A Lock that has not waited yet goes behind the Locks already waiting,
// and a release wakes the first in line by name: a holder that locks again
// right after releasing does not take the lock back from a waiter of
// another Client (process). The line is best effort (a waiter's place can
// reach some nodes after the release does), so this counts: without it the
// releaser, which needs no wake-up, takes the lock back nearly every time.
func TestIntegrationReleaseHandsOffToTheWaiter(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redlock.Option
	}{{"reservation", nil}, {"key hand-off", []redlock.Option{redlock.WithKeyHandOff()}}} {
		t.Run(tc.name, func(t *testing.T) {
			testReleaseHandsOffToTheWaiter(t, tc.opts...)
		})
	}
}

func testReleaseHandsOffToTheWaiter(t *testing.T, opts ...redlock.Option) {
	cl := newCluster(t)
	a := cl.client(t, opts...)
	b := cl.client(t, append([]redlock.Option{redlock.WithRetry(func(int) time.Duration { return 5 * time.Second }, 0)}, opts...)...)
	ctx := context.Background()
	key := testenv.Key(t)
	lock := func(c *redlock.Client) <-chan *redlock.Lease {
		ch := make(chan *redlock.Lease, 1)
		go func() {
			l, err := c.Lock(ctx, key, 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			ch <- l
		}()
		return ch
	}
	const rounds = 20
	handed := 0
	for round := range rounds {
		la, err := a.Lock(ctx, key, 5*time.Second)
		require.NoError(t, err)
		got := lock(b)
		// B is in line once its first attempt failed, on the nodes that
		// answered before the attempt was decided (a majority at least);
		// it retries only after 5 s unless a release wakes it.
		require.Eventually(t, func() bool {
			in := 0
			for _, rc := range cl.clients {
				if n, err := rc.ZCard(ctx, "quorumlock:queue:"+key).Result(); err == nil && n > 0 {
					in++
				}
			}
			return in > len(cl.clients)/2
		}, 2*time.Second, time.Millisecond, "round %d: B never joined the line", round)
		start := time.Now()
		require.NoError(t, la.Release(ctx))
		again := lock(a)
		select {
		case lb := <-got:
			handed++
			require.Less(t, time.Since(start), time.Second, "round %d: the waiter waited for its retry timer, not the release", round)
			require.NoError(t, lb.Release(ctx))
			require.NoError(t, (<-again).Release(ctx))
		case l := <-again:
			t.Logf("round %d: the releaser took the lock back past the waiter", round)
			require.NoError(t, l.Release(ctx))
			select {
			case lb := <-got:
				require.NoError(t, lb.Release(ctx))
			case <-time.After(3 * time.Second):
				t.Fatalf("round %d: the waiter was not woken by the second release", round)
			}
		case <-time.After(3 * time.Second):
			for i, rc := range cl.clients {
				v, _ := rc.Get(ctx, key).Result()
				p, _ := rc.PTTL(ctx, key).Result()
				q, _ := rc.ZRangeWithScores(ctx, "quorumlock:queue:"+key, 0, -1).Result()
				t.Logf("node %d holds %q (pttl %v), line %v", i, v, p, q)
			}
			t.Fatalf("round %d: the waiter was not woken by the release", round)
		}
	}
	t.Logf("%d of %d releases handed the lock to the waiter", handed, rounds)
	require.GreaterOrEqual(t, handed, rounds-3, "the releaser took the lock back past the waiter too often")
}

// A Lock call that gives up leaves the key's line on every node, so that
// the next release names a waiter that is still there.
func TestIntegrationLockThatGivesUpLeavesTheLine(t *testing.T) {
	cl := newCluster(t)
	a := cl.client(t)
	b := cl.client(t, redlock.WithRetry(func(int) time.Duration { return 20 * time.Millisecond }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	la, err := a.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	defer la.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = b.Lock(wctx, key, 5*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool {
		for _, rc := range cl.clients {
			if n, err := rc.ZCard(ctx, "quorumlock:queue:"+key).Result(); err != nil || n > 0 {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond, "the Lock that gave up is still in the key's line")
}

// A waiter that crashed stays in the key's line (nothing took it out).
// The next release names it and reserves the key for it, but only once
// and only for the reservation's length: the key frees for the others,
// and the ghost is out of the line afterwards.
func TestIntegrationAWaiterThatCrashedHoldsTheKeyUpOnce(t *testing.T) {
	cl := newCluster(t)
	a := cl.client(t)
	b := cl.client(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := a.Lock(ctx, key, 2*time.Second)
	require.NoError(t, err)
	for _, rc := range cl.clients {
		require.NoError(t, rc.ZAdd(ctx, "quorumlock:queue:"+key, redis.Z{Score: 1, Member: "ghost"}).Err())
	}
	require.NoError(t, l.Release(ctx))
	start := time.Now()
	require.Eventually(t, func() bool {
		l, err := b.TryLock(ctx, key, 2*time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, l.Release(ctx))
		return true
	}, 2*time.Second, 5*time.Millisecond, "the key stayed reserved for a waiter that is gone")
	t.Logf("free for others %v after the release that named the ghost", time.Since(start))
	for i, rc := range cl.clients {
		_, err := rc.ZScore(ctx, "quorumlock:queue:"+key, "ghost").Result()
		require.ErrorIs(t, err, redis.Nil, "node %d: the ghost is still in line", i)
	}
}
