package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Fencing tokens: how a token is made, that tokens increase in grant
// order through faults, wipes and expired fences, and that everything the
// library writes expires (docs/protocol.md, "The protocol", "Fences
// expire").

// TestFencing_TokensIncreaseThroughFreezesAndARestart checks that tokens strictly increase in
// grant order under contention while random minorities are frozen, and
// across a kill -9 and empty restart of a node.
func TestFencing_TokensIncreaseThroughFreezesAndARestart(t *testing.T) {
	cl := newCluster(t, 5)
	const ttl = time.Second
	c, _ := cl.ready(t, WithFencing(), WithMaxTTL(ttl))
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
					err := c.Do(ctx, key, ttl, func(ctx context.Context, l *Lease) error {
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

// The fencing token is 1 + the largest fence among the replies the
// acquisition counted, whichever node it came from and in whatever order
// the replies arrived. The fences here are far above the nodes' clocks in
// µs (about 1.8e15), so the time floor does not decide the token; node 0
// holds the largest and answers first, nodes 1 and 2 answer 100 and 150ms
// later (each call is delayed, so an EVALSHA sent again as EVAL twice),
// giving the grants that make the majority; 3 and 4 answer later still.
//
// Guards against: commit taking the fence of the last counted reply
// (node 2's here) instead of the largest: a token below one an earlier
// holder may have used (node 0's fence), which a fenced resource refuses,
// or one equal to an older holder's, which it accepts.
func TestFencing_TheTokenIsOnePlusTheLargestCountedFence(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const ttl = 5 * time.Second
	key := testenv.Key(t)
	fences := []uint64{9_000_000_000_009_000, 9_000_000_000_001_001, 9_000_000_000_001_002, 9_000_000_000_001_003, 9_000_000_000_001_004}
	delays := []time.Duration{0, 100 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond}
	var mu sync.Mutex
	var order []int // nodes in the order their acquire replies came back
	c, f := cl.ready(t, WithFencing(), WithMaxTTL(ttl), WithNodeTimeout(2*time.Second))
	for i, d := range delays {
		if d > 0 {
			f.delay(d, "acquire", i)
		}
	}
	f.after(func(c *call, err error) {
		// An EVALSHA answered NOSCRIPT is sent again as EVAL.
		if c.Script == "acquire" && c.Keys[0] == key && (err == nil || !isNoScript(err)) {
			mu.Lock()
			order = append(order, c.Node)
			mu.Unlock()
		}
	})
	for i, fence := range fences {
		require.NoError(t, cl.raw[i].Set(ctx, keyFence(key), strconv.FormatUint(fence, 10), 0).Err())
	}

	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	mu.Lock()
	got := append([]int(nil), order...)
	mu.Unlock()
	require.GreaterOrEqual(t, len(got), 3)
	require.Equal(t, []int{0, 1, 2}, got[:3], "the replies did not come back in the order the test needs")
	require.Equal(t, fences[0]+1, l.FencingToken(), "token %d: want 1 + node 0's fence %d, the largest counted (the last counted was node 2's, %d)",
		l.FencingToken(), fences[0], fences[2])

	// The token was committed where the key is ours: a majority's fences
	// are now the token.
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, l.FencingToken(), ks.MaxFence)
	require.NoError(t, l.Release(ctx))
}

// Tokens increase with every grant, also past a minority whose fence ran
// far ahead (as failed attempts can leave it).
func TestFencing_TokensIncreasePastAMinorityFenceAhead(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing())
	ctx := context.Background()
	key := testenv.Key(t)
	var last uint64
	for i := range 20 {
		if i == 10 {
			cl.set(t, keyFence(key), fmt.Sprint(last+1_000_000), 0, 4)
		}
		l, err := c.TryLock(ctx, key, time.Second)
		require.NoError(t, err)
		require.Greater(t, l.FencingToken(), last, "attempt %d", i)
		last = l.FencingToken()
		require.NoError(t, l.Release(ctx))
	}
}

func TestFencing_APlainLeaseHasNoToken(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	l, err := c.TryLock(context.Background(), testenv.Key(t), time.Second)
	require.NoError(t, err)
	require.Zero(t, l.FencingToken())
}

func TestFencing_TheTokenStaysABigint(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing())
	ctx := context.Background()
	key := testenv.Key(t)
	cl.set(t, keyFence(key), "9223372036854775806", 0, cl.all()...) // MaxInt64 - 1: one more token fits
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxInt64), l.FencingToken())
	require.NoError(t, l.Release(ctx))
	cl.requireGone(t, key, "after Release")

	_, err = c.TryLock(ctx, key, time.Second) // the fence is now MaxInt64
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "largest PostgreSQL bigint")
	cl.requireGone(t, key, "after the refused attempt") // nothing left behind
}

// A fencing commit that reaches fewer than a majority makes the attempt
// fail and clean up: the token would not be ordered.
func TestFencing_ACommitOnAMinorityFailsTheAttempt(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithFencing())
	ctx := context.Background()
	key := testenv.Key(t)
	boom := errors.New("commit refused")
	f.fail(boom, "commit", 0, 1, 2)
	_, err := c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "fence commit")
	cl.requireGone(t, key, "after the failed commit")
	f.heal()
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.NotZero(t, l.FencingToken())
}

// The time floor alone keeps tokens increasing when the only node shared by
// two holders' majorities lost its fence (restart without persistence).
// The quarantine is off here so the wiped node votes once it is proven
// again, and only the floor stands between B and a token below A's.
func TestFencing_TheTimeFloorSurvivesALostFence(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.faulty(t, WithFencing(), withoutRestartQuarantine())
	ctx := context.Background()
	key := testenv.Key(t)
	boom := errors.New("unreachable")
	f.fail(boom, "", 3, 4)
	a, err := c.TryLock(ctx, key, time.Second) // commits on nodes 0, 1, 2 only
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	f.requireIdle(t)
	f.heal()
	cl.wipe(t, 2) // node 2 forgets its fence, and its identity
	// Node 2 counts again once a proof gives it an identity, which a lock
	// that meets it starts, and which waits for every verified node
	// (identity.go): before nodes 0 and 1 go.
	other, err := c.TryLock(ctx, key+"-other", time.Second)
	require.NoError(t, err)
	require.NoError(t, other.Release(ctx))
	require.Eventually(t, func() bool {
		id := provenOn(c, 2)
		return id != "" && id == cl.value(t, 2, keyIdent)
	}, 2*time.Second, 5*time.Millisecond, "node 2 was never proven again")
	f.fail(boom, "", 0, 1)
	b, err := c.TryLock(ctx, key, time.Second) // reads fences only on 2, 3, 4: all empty
	require.NoError(t, err)
	require.Greater(t, b.FencingToken(), a.FencingToken(), "token inversion after a lost fence")
}

// Fences expire (docs/protocol.md, "Fences expire"). A red-team review found
// that a worker locking one key per payment WithFencing left one fence key
// per payment on every node for ever; with noeviction, memory grew until
// Redis refused writes.

// skewedCluster starts one node per offset, its wall clock that far from
// true time.
func skewedCluster(t *testing.T, offsets ...time.Duration) *cluster {
	t.Helper()
	var nodes []*testenv.RedisNode
	for _, off := range offsets {
		nodes = append(nodes, testenv.Redis(t, testenv.SkewedClock(t, off).Option()))
	}
	return clusterOf(t, nodes)
}

// waitFenceGone waits until no node holds key's fence, failing after limit.
func (cl *cluster) waitFenceGone(t *testing.T, key string, limit time.Duration) {
	t.Helper()
	left := func() []int {
		var out []int
		for i, raw := range cl.raw {
			if n, err := raw.Exists(context.Background(), keyFence(key)).Result(); err != nil || n == 1 {
				out = append(out, i)
			}
		}
		return out
	}
	if !assert.Eventually(t, func() bool { return len(left()) == 0 }, limit, 20*time.Millisecond) {
		t.Fatalf("the fence of %q is still on nodes %v %v after its lease was released: fences never expire", key, left(), limit)
	}
}

func TestFencing_TokensIncreaseAfterTheFenceExpired(t *testing.T) {
	const maxTTL = 400 * time.Millisecond
	q, err := Quarantine(maxTTL, DefaultDriftFactor)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		skew time.Duration // node 0 runs skew ahead of true time, the others skew behind
		// whether the later token must be larger: node clocks 2*skew apart,
		// against the one quarantine a fence outlives its lease by
		increases bool
	}{
		{"node clocks apart by less than one quarantine", q * 3 / 8, true},
		{"node clocks apart by more than a fence's life", 10 * q, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := skewedCluster(t, tc.skew, -tc.skew, -tc.skew, -tc.skew, -tc.skew)
			c := cl.client(t, WithFencing(), WithMaxTTL(maxTTL))
			ctx := context.Background()
			require.NoError(t, c.Bootstrap(ctx))
			key := testenv.Key(t)

			// The first lease counts node 0, whose clock is ahead: nodes 3
			// and 4 are busy, so its majority is nodes 0, 1 and 2, and its
			// token's floor is node 0's clock.
			cl.hold(t, key, time.Minute, 3, 4)
			var l1 *Lease
			require.Eventually(t, func() bool { l1, err = c.TryLock(ctx, key, maxTTL); return err == nil },
				5*time.Second, 50*time.Millisecond, "no first lease: %v", err)
			t1 := l1.FencingToken()
			require.NoError(t, l1.Release(ctx))
			cl.drop(t, key, 3, 4)
			// The fence outlives the released key by one quarantine at least
			// on the majority that committed it (a straggling commit that
			// lands after the release finds the key gone and writes none),
			// and then goes.
			keep := fenceKeepOf(c, maxTTL)
			var kept int
			for i, raw := range cl.raw {
				pttl, err := raw.PTTL(ctx, keyFence(key)).Result()
				require.NoError(t, err)
				require.LessOrEqual(t, pttl, keep, "node %d", i)
				if pttl > q {
					kept++
				}
			}
			require.GreaterOrEqual(t, kept, quorumOf(c), "the fence must outlive the lease by a quarantine on a majority")
			cl.waitFenceGone(t, key, keep+2*time.Second)

			// The next holder's majority leaves out node 0, whose clock set
			// the floor of t1.
			require.NoError(t, cl.nodes[0].Pause())
			t.Cleanup(func() { _ = cl.nodes[0].Resume() })
			// A few tries: the fencing commit needs three of the four live
			// nodes within a node timeout of a 400 ms ttl, which a loaded
			// machine misses now and then.
			var l2 *Lease
			require.Eventually(t, func() bool { l2, err = c.TryLock(ctx, key, maxTTL); return err == nil },
				5*time.Second, 50*time.Millisecond, "no second lease: %v", err)
			t2 := l2.FencingToken()
			require.NoError(t, l2.Release(ctx))
			if tc.increases {
				require.Greater(t, t2, t1, "a fence that expired must not let tokens go back while node clocks agree within the bound")
			} else {
				// Beyond the stated clock bound the floor cannot help: this
				// is why docs/protocol.md states it.
				require.Less(t, t2, t1, "with node clocks %v apart the token is expected to go back", 2*tc.skew)
			}
		})
	}
}

// TestKeys_EverythingTheLibraryWritesExpires locks, contends, waits,
// fences and cleans up on many keys, then requires that every key on every
// node expires, except the deployment-wide ones, and that once the leases
// and lines are over the nodes hold only those.
func TestKeys_EverythingTheLibraryWritesExpires(t *testing.T) {
	const maxTTL = 500 * time.Millisecond
	cl := newCluster(t, 5)
	fenced := cl.client(t, WithFencing(), WithMaxTTL(maxTTL))
	plain := cl.client(t, WithMaxTTL(maxTTL), WithKeyHandOff())
	ctx := context.Background()
	require.NoError(t, fenced.Bootstrap(ctx))

	prefix := testenv.Key(t)
	handedWithMeta := 0
	for i := range 40 {
		key := fmt.Sprintf("%s:%d", prefix, i)
		c := fenced
		if i%2 == 1 {
			c = plain
		}
		// Holder metadata on every other key, the handed ones' included
		// (the plain client's waiters at i%4 == 1 take the key from the
		// release and store their metadata with meta.lua), and on the
		// leases that are lost (i%8 == 2).
		var opts []CallOption
		if i%4 < 2 || i%8 == 2 {
			opts = append(opts, WithMetadata(fmt.Sprintf("job=%d", i)))
		}
		l, err := c.TryLock(ctx, key, maxTTL, opts...)
		require.NoError(t, err)
		if i%4 < 2 {
			// A waiter in line, a failed attempt's tombstones, a hand-off;
			// the waiter's lease is extended before it is released, or,
			// at i%8 == 5, lost.
			done := make(chan error, 1)
			handed := make(chan bool, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				l2, err := c.Lock(wctx, key, maxTTL, opts...)
				handed <- err == nil && handedTo(valueOf(l2))
				if err == nil && i%8 == 5 {
					done <- nil // lost: its keys must go by themselves
					return
				}
				if err == nil {
					err = l2.Extend(ctx, maxTTL)
				}
				if err == nil {
					err = l2.Release(ctx)
				}
				done <- err
			}()
			_, err := c.TryLock(ctx, key, maxTTL)
			require.ErrorIs(t, err, ErrNotObtained)
			// The waiter tried and waits in line on a majority (a node
			// may have missed the attempt's deadline) before the release.
			require.Eventually(t, func() bool {
				in := 0
				for _, raw := range cl.raw {
					if n, err := raw.ZCard(ctx, keyLine(key)).Result(); err == nil && n == 1 {
						in++
					}
				}
				return in >= 3
			}, 3*time.Second, time.Millisecond, "key %d: the waiter never joined the line", i)
			require.NoError(t, l.Release(ctx))
			require.NoError(t, <-done)
			if <-handed && len(opts) > 0 {
				handedWithMeta++
			}
			continue
		}
		if i%8 == 2 {
			// A lease with metadata that is extended and then lost: never
			// released, its keys and metadata must go by themselves.
			require.NoError(t, l.Extend(ctx, maxTTL))
			continue
		}
		require.NoError(t, l.Release(ctx))
	}
	require.Positive(t, handedWithMeta, "no lease with metadata was handed over by a release: the hand-off's metadata write went untested")

	persistent := func() map[int][]string {
		out := map[int][]string{}
		for i, raw := range cl.raw {
			var cursor uint64
			for {
				keys, next, err := raw.Scan(ctx, cursor, "*", 100).Result()
				require.NoError(t, err)
				for _, k := range keys {
					pttl, err := raw.PTTL(ctx, k).Result()
					require.NoError(t, err)
					if pttl == -1 { // go-redis passes -1 (no expiry) through unscaled
						out[i] = append(out[i], k)
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return out
	}
	for i, keys := range persistent() {
		// The deployment keys this run writes (a reconfiguration's trace is
		// not one of them), and nothing else.
		require.Subset(t, persistentKeys(), keys, "node %d: keys without an expiry", i)
		require.Subset(t, keys, []string{keyMarker, keyIdent}, "node %d: keys without an expiry", i)
	}
	// Everything else goes within the longest life a key gets: a fence's.
	extra := func() []string {
		var out []string
		for i, raw := range cl.raw {
			keys, err := raw.Keys(ctx, "*").Result()
			if err != nil {
				out = append(out, fmt.Sprintf("node %d: %v", i, err))
				continue
			}
			for _, k := range keys {
				if !slices.Contains(persistentKeys(), k) {
					out = append(out, fmt.Sprintf("node %d: %s", i, k))
				}
			}
		}
		return out
	}
	if !assert.Eventually(t, func() bool { return len(extra()) == 0 }, fenceKeepOf(fenced, maxTTL)+3*time.Second, 50*time.Millisecond) {
		t.Fatalf("keys still on the nodes long after every lease and line ended: %v", extra())
	}
}

// The residual case (docs/protocol.md): when every node loses its data
// while a lease is trusted, a client with a shorter max TTL that comes
// first decides the deployment's settings and can be granted the lock
// before the old lease ends. No node keeps anything to refuse it with.
// What still holds is fencing: the time floor gives the new holder a
// larger token than the old one, so a fenced resource refuses the old
// holder's late writes. If the first check fails, the residual case has
// been closed: update docs/protocol.md and turn this test around.
func TestFencing_AfterAFullWipeTokensStillIncrease(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL, short = 3 * time.Second, 300 * time.Millisecond
	a := cl.client(t, WithMaxTTL(maxTTL), WithFencing(), WithNodeTimeout(200*time.Millisecond))
	require.NoError(t, a.Bootstrap(ctx))
	la, err := a.TryLock(ctx, "k", maxTTL)
	require.NoError(t, err)
	// TryLock returns at a majority; its acquire and fence-commit calls to
	// the other nodes run on in A's background. One that reached its node
	// after the wipe found the node unadmitted and started its admission
	// under A's settings (max ttl 3s), and B was then refused: not the
	// residual case (about 1 run in 100). Wipe only once they are in.
	settled(t, a, 10*time.Second)
	// The five restarts run at once: one after another they took more
	// than A's 3s lease on a loaded machine (load average 15: 6 runs in
	// 100), and the test then never reached the overlap.
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		wg.Go(func() { errs[i] = errors.Join(cl.nodes[i].Kill(), cl.nodes[i].Restart(ctx)) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	b := cl.client(t, WithMaxTTL(short), WithFencing(), WithNodeTimeout(200*time.Millisecond))
	lctx, cancel := context.WithTimeout(ctx, maxTTL/2)
	defer cancel()
	lb, err := b.Lock(lctx, "k", short)
	require.NoError(t, err, "the residual case no longer grants: docs/protocol.md describes it as open")
	require.True(t, time.Now().Before(la.Deadline()), "A's lease ended before B was granted: the test did not reach the overlap")
	require.Greater(t, lb.FencingToken(), la.FencingToken(),
		"after a full wipe the new holder's token must still be above the old holder's")
	require.NoError(t, lb.Release(ctx))
}
