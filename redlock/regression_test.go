package redlock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Regression tests for the double grants and lifecycle bugs a review found,
// each on real redis-server processes. Interleavings that need a call to
// stall at a precise point go through hookScripter, hooks on the real
// client (faults by wrapping, never by patching the library).

// realCluster is n real nodes and a raw client per node.
type realCluster struct {
	nodes []*testenv.RedisNode
	raw   []*redis.Client
}

func newRealCluster(t *testing.T, n int) *realCluster {
	t.Helper()
	nodes := testenv.RedisNodes(t, n)
	rc := &realCluster{nodes: nodes}
	for _, nd := range nodes {
		rc.raw = append(rc.raw, nd.Client(t))
	}
	return rc
}

// client builds a Client over the cluster whose calls to node i go through
// wrap(i, client) when wrap is not nil, and its own go-redis clients built
// by mk (nil: default options).
func (rc *realCluster) client(t *testing.T, wrap func(i int, sc redis.Scripter) redis.Scripter, mk func(addr string) *redis.Client, opts ...Option) *Client {
	t.Helper()
	ns := make([]*node, len(rc.nodes))
	for i, nd := range rc.nodes {
		var uc *redis.Client
		if mk != nil {
			uc = mk(nd.Addr())
		} else {
			uc = redis.NewClient(&redis.Options{Addr: nd.Addr()})
		}
		t.Cleanup(func() { _ = uc.Close() })
		if wrap != nil {
			// The hooks of the hookScripters wrap returns run as a go-redis
			// hook on the node's client; the calls they make themselves go
			// to a client of their own, without the hooks.
			var raw *redis.Client
			if mk != nil {
				raw = mk(nd.Addr())
			} else {
				raw = redis.NewClient(&redis.Options{Addr: nd.Addr()})
			}
			t.Cleanup(func() { _ = raw.Close() })
			sc := wrap(i, raw)
			for h, ok := sc.(hookScripter); ok; h, ok = h.Scripter.(hookScripter) {
				uc.AddHook(scriptHook{h})
			}
		}
		ns[i] = &node{idx: i, name: addrOf(uc, i), uc: uc}
	}
	c, err := newClient(ns, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// As New does; a loaded machine gets a few tries, and a node the test
	// keeps down stays unverified.
	for deadline := time.Now().Add(3 * time.Second); !c.ident.allVerified() && time.Now().Before(deadline); {
		vctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = c.verify(vctx)
		cancel()
		if !c.ident.allVerified() {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// newTestClient is a Client over a new cluster of n real nodes, its
// deployment bootstrapped.
func newTestClient(t *testing.T, n int, opts ...Option) (*Client, *realCluster) {
	t.Helper()
	rc := newRealCluster(t, n)
	c := rc.client(t, nil, nil, opts...)
	require.NoError(t, c.Bootstrap(context.Background()))
	return c, rc
}

// restartEmpty kills node i with SIGKILL and starts it again without data.
func (rc *realCluster) restartEmpty(t *testing.T, i int) {
	t.Helper()
	require.NoError(t, rc.nodes[i].Kill())
	require.NoError(t, rc.nodes[i].Restart(context.Background()))
}

// value reads key on node i ("" when absent).
func (rc *realCluster) value(t *testing.T, i int, key string) string {
	t.Helper()
	v, err := rc.raw[i].Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// hold makes another owner hold key on the given nodes for ttl.
func (rc *realCluster) hold(t *testing.T, key string, ttl time.Duration, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, rc.raw[i].Set(context.Background(), key, "another-owner", ttl).Err())
	}
}

func (rc *realCluster) drop(t *testing.T, key string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, rc.raw[i].Del(context.Background(), key).Err())
	}
}

// admittedOn reports whether node i carries an admission marker.
func (rc *realCluster) admittedOn(t *testing.T, i int) bool {
	t.Helper()
	n, err := rc.raw[i].Exists(context.Background(), script.MarkerKey).Result()
	require.NoError(t, err)
	return n == 1
}

// settled waits until c's background work (a round's stragglers and
// cleanups, admissions) is done, and fails t when it is not within d.
func settled(t *testing.T, c *Client, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the client's background work (stragglers, cleanups, admissions) did not end within %v", d)
	}
}

// hookScripter names the before and after hooks that a realCluster
// client runs around every script call to one node, as a go-redis hook on
// the node's client (scriptHook). A before hook returning a non-nil
// *redis.Cmd answers the call instead of the node.
type hookScripter struct {
	redis.Scripter
	before func(ctx context.Context, script string, keys []string, args []any) *redis.Cmd
	after  func(ctx context.Context, script string, keys []string, args []any, cmd *redis.Cmd)
}

// The scripts, for hooks that run an intercepted call themselves.
var (
	acquireScript = script.ByName("acquire")
	releaseScript = script.ByName("release")
	admitScript   = script.ByName("admit")
)

// isNoScript reports a NOSCRIPT answer, which the client follows with an
// EVAL of the same call.
func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// scriptHook runs a hookScripter's hooks around the script calls
// (EVALSHA, EVAL) a client sends, alone or in a pipeline.
type scriptHook struct{ h hookScripter }

// scriptCall reads a script call: its script's name, keys and arguments.
func scriptCall(cmd redis.Cmder) (c *redis.Cmd, name string, keys []string, args []any, ok bool) {
	c, ok = cmd.(*redis.Cmd)
	a := cmd.Args()
	if !ok || len(a) < 3 {
		return nil, "", nil, nil, false
	}
	var sha string
	switch strings.ToLower(fmt.Sprint(a[0])) {
	case "evalsha":
		sha = fmt.Sprint(a[1])
	case "eval":
		sha = redis.NewScript(fmt.Sprint(a[1])).Hash()
	default:
		return nil, "", nil, nil, false
	}
	n, err := strconv.Atoi(fmt.Sprint(a[2]))
	if err != nil || 3+n > len(a) {
		return nil, "", nil, nil, false
	}
	for _, k := range a[3 : 3+n] {
		keys = append(keys, fmt.Sprint(k))
	}
	return c, script.NameOf(sha), keys, a[3+n:], true
}

// answer reports whether the before hook answered cmd, and answers it.
func (s scriptHook) answer(ctx context.Context, cmd redis.Cmder) bool {
	c, name, keys, args, ok := scriptCall(cmd)
	if !ok || s.h.before == nil {
		return false
	}
	r := s.h.before(ctx, name, keys, args)
	if r == nil {
		return false
	}
	c.SetVal(r.Val())
	c.SetErr(r.Err())
	return true
}

func (s scriptHook) answered(ctx context.Context, cmd redis.Cmder) {
	if c, name, keys, args, ok := scriptCall(cmd); ok && s.h.after != nil {
		s.h.after(ctx, name, keys, args, c)
	}
}

func (s scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s.answer(ctx, cmd) {
			return cmd.Err()
		}
		err := next(ctx, cmd)
		if err != nil {
			cmd.SetErr(err) // as the client does once the hooks return
		}
		s.answered(ctx, cmd)
		return err
	}
}

func (s scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, cmd := range cmds {
			if !s.answer(ctx, cmd) {
				rest = append(rest, cmd)
			}
		}
		var err error
		if len(rest) > 0 {
			err = next(ctx, rest)
		}
		for _, cmd := range rest {
			s.answered(ctx, cmd)
		}
		return err
	}
}

// 1. A client stalls between finding a node's quarantine over and running
// the admit script. Meanwhile another client admits the node, locks on it,
// and the node is wiped again. The stalled admission must not admit the
// wiped node: it would then grant a second lock while the first is valid.
func TestRegressionStalledAdmissionCannotAdmitAWipedNode(t *testing.T) {
	rc := newRealCluster(t, 5)
	const maxTTL = 2 * time.Second
	// A broken admission must fail this test in seconds, not hang it until
	// the package's timeout: every wait below has a deadline, and the
	// stalled call is let go before the clients close (Close waits for
	// it).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	stall := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 0 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(_ context.Context, script string, keys []string, args []any) *redis.Cmd {
			if script != "admit" {
				return nil
			}
			var cmd *redis.Cmd
			once.Do(func() {
				// The admission stalls with its request already on the
				// wire (a paused process, a slow network): it reaches the
				// node later, whatever the caller's deadline says by then.
				close(entered)
				<-release
				cmd = admitScript.Run(context.Background(), sc, keys, args...)
				close(done)
			})
			return cmd
		}}
	}
	var unstall sync.Once
	s := rc.client(t, stall, nil, WithMaxTTL(maxTTL))
	b := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	// Registered after the clients, so it runs before their Close.
	t.Cleanup(func() { unstall.Do(func() { close(release) }) })

	// S finds the new deployment and starts admitting node 0, then stalls
	// right before its admit script.
	_, _ = s.TryLock(ctx, "warm", maxTTL)
	select {
	case <-entered:
	case <-time.After(4 * maxTTL):
		t.Fatalf("the admission of node 0 never reached its admit script within %v", 4*maxTTL)
	}

	// B admits the nodes and locks exactly 0, 1, 2.
	key := keyAvoiding(t, 3, 4)
	rc.hold(t, key, time.Minute, 3, 4)
	lctx, lcancel := context.WithTimeout(ctx, 4*maxTTL)
	defer lcancel()
	l1, err := b.Lock(lctx, key, maxTTL)
	require.NoError(t, err, "B was not granted the lock on nodes 0, 1, 2 within %v", 4*maxTTL)
	require.Equal(t, l1.value, rc.value(t, 0, key))

	// Node 0 is wiped; then S's stalled admission goes on.
	rc.restartEmpty(t, 0)
	unstall.Do(func() { close(release) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled admission did not return within 10s of being let go")
	}
	require.False(t, rc.admittedOn(t, 0), "the stalled admission admitted a node that was wiped after it looked")

	// Nodes 3 and 4 free up: a lock on 0, 3, 4 would be a double grant.
	rc.drop(t, key, 3, 4)
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	l2, err := s.TryLock(tctx, key, maxTTL)
	require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
	require.ErrorIs(t, err, ErrNotObtained, "double grant: %v and %v", l1, l2)
}

// 2. Two clients name the same nodes differently (here "tcp" and "tcp4").
// After a node restarts empty, the second client must still treat it as a
// node that may have forgotten a live lock.
func TestRegressionNodeNamedTwoWays(t *testing.T) {
	rc := newRealCluster(t, 5)
	const maxTTL = 3 * time.Second
	ctx := context.Background()
	network := func(nw string) func(string) *redis.Client {
		return func(addr string) *redis.Client { return redis.NewClient(&redis.Options{Network: nw, Addr: addr}) }
	}
	a := rc.client(t, nil, network("tcp"), WithMaxTTL(maxTTL))
	b := rc.client(t, nil, network("tcp4"), WithMaxTTL(maxTTL))
	lctx, cancel := context.WithTimeout(ctx, 4*maxTTL)
	defer cancel()
	warm, err := a.Lock(lctx, "warm", maxTTL) // admits the deployment
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	key := keyAvoiding(t, 3, 4)
	rc.hold(t, key, time.Minute, 3, 4)
	l1, err := a.TryLock(ctx, key, maxTTL)
	require.NoError(t, err)
	rc.restartEmpty(t, 0)
	rc.drop(t, key, 3, 4)
	l2, err := b.TryLock(ctx, key, maxTTL)
	require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
	require.ErrorIs(t, err, ErrNotObtained, "double grant under another name for node 0: %v and %v", l1, l2)
}

// 3. Nodes 0-3 restart one after another while the client that re-admits
// them cannot reach node 4; then node 4 restarts empty. It must not pass
// as a node that never granted anything.
func TestRegressionRollingRestartsKeepTheQuarantine(t *testing.T) {
	rc := newRealCluster(t, 5)
	const maxTTL = time.Second
	ctx := context.Background()
	cut := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 4 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(context.Context, string, []string, []any) *redis.Cmd {
			return redis.NewCmdResult(nil, errors.New("dial tcp: connection refused"))
		}}
	}
	d := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	a := rc.client(t, cut, nil, WithMaxTTL(maxTTL))
	lctx, cancel := context.WithTimeout(ctx, 4*maxTTL)
	defer cancel()
	warm, err := d.Lock(lctx, "warm", maxTTL)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	require.Eventually(t, func() bool {
		for i := range 5 {
			if !rc.admittedOn(t, i) {
				return false
			}
		}
		return true
	}, 4*maxTTL, 10*time.Millisecond)

	for i := range 4 {
		rc.restartEmpty(t, i)
		// A uses the lock until the restarted node is back.
		require.Eventually(t, func() bool {
			if l, err := a.TryLock(ctx, "roll", maxTTL); err == nil {
				require.NoError(t, l.Release(ctx))
			}
			return rc.admittedOn(t, i)
		}, 4*maxTTL, 20*time.Millisecond, "node %d not re-admitted", i)
	}

	key := keyAvoiding(t, 0, 1)
	rc.hold(t, key, time.Minute, 0, 1)
	l1, err := d.TryLock(ctx, key, maxTTL)
	require.NoError(t, err)
	require.Equal(t, l1.value, rc.value(t, 4, key))
	rc.restartEmpty(t, 4)
	rc.drop(t, key, 0, 1)
	c := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	l2, err := c.TryLock(ctx, key, maxTTL)
	require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
	require.ErrorIs(t, err, ErrNotObtained, "double grant through node 4: %v and %v", l1, l2)
}

// 4. A client built with a shorter max ttl must not end a restarted node's
// quarantine early while a longer lease of another client is live.
func TestRegressionShortMaxTTLClientCannotShortenTheQuarantine(t *testing.T) {
	rc := newRealCluster(t, 5)
	const long, short = 5 * time.Second, 300 * time.Millisecond
	ctx := context.Background()
	a := rc.client(t, nil, nil, WithMaxTTL(long))
	lctx, cancel := context.WithTimeout(ctx, 4*long)
	defer cancel()
	warm, err := a.Lock(lctx, "warm", long)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	// A majority admitted is enough for the warm-up's lease; the test
	// needs every node admitted (the others follow in the background).
	require.Eventually(t, func() bool {
		for i := range 5 {
			if !rc.admittedOn(t, i) {
				if l, err := a.TryLock(ctx, "warm", long); err == nil {
					require.NoError(t, l.Release(ctx))
				}
				return false
			}
		}
		return true
	}, 4*long, 20*time.Millisecond, "the nodes were not all admitted")

	key := keyAvoiding(t, 3, 4)
	rc.hold(t, key, time.Minute, 3, 4)
	l1, err := a.TryLock(ctx, key, long)
	require.NoError(t, err)
	rc.restartEmpty(t, 0)
	rc.drop(t, key, 3, 4)
	b := rc.client(t, nil, nil, WithMaxTTL(short))
	// B keeps trying for several of its own quarantines.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		l2, err := b.TryLock(ctx, key, short)
		require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
		require.Error(t, err, "double grant by a client with a shorter max ttl: %v and %v", l1, l2)
		require.Nil(t, l2)
	}
}

// 5. A max ttl meant as "no limit" must be refused, not turned into a
// quarantine that overflows to nothing.
func TestRegressionHugeMaxTTLIsRefused(t *testing.T) {
	rc := newRealCluster(t, 5)
	var ucs []redis.UniversalClient
	for _, r := range rc.raw {
		ucs = append(ucs, r)
	}
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 / 2, 300 * 24 * time.Hour} {
		c, err := New(ucs, WithMaxTTL(d))
		require.Error(t, err, "max ttl %v accepted", d)
		require.Nil(t, c)
	}
}

// 6. Two Extends of one lease whose replies come back in the other order
// than their effects: the nodes must never hold less than the lease
// promises.
func TestRegressionConcurrentExtends(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	var longRan atomic.Int32
	replyLong := make(chan struct{})
	slowLong := func(i int, sc redis.Scripter) redis.Scripter {
		return hookScripter{Scripter: sc, after: func(_ context.Context, script string, _ []string, args []any, cmd *redis.Cmd) {
			// Only a call that ran counts (not a NOSCRIPT before the EVAL).
			if script == "extend" && fmt.Sprint(args[1]) == "10000" && cmd.Err() == nil {
				longRan.Add(1)
				<-replyLong // the extend ran on the node; its reply is slow
			}
		}}
	}
	// The node timeout is long enough for the slow replies to count.
	c := rc.client(t, slowLong, nil, WithMaxTTL(20*time.Second), WithNodeTimeout(3*time.Second))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)

	long := make(chan error, 1)
	go func() { long <- l.Extend(ctx, 10*time.Second) }()
	require.Eventually(t, func() bool { return longRan.Load() == 5 }, 2*time.Second, time.Millisecond)
	require.NoError(t, l.Extend(ctx, time.Second)) // lands last, replies first
	close(replyLong)
	require.NoError(t, <-long)

	promised := time.Until(l.Deadline())
	var covered int
	for i := range 5 {
		left := rc.raw[i].PTTL(ctx, key).Val()
		t.Logf("node %d holds the key for %v; the lease promises %v", i, left, promised)
		if left >= promised-50*time.Millisecond {
			covered++
		}
	}
	require.GreaterOrEqual(t, covered, 3, "the lease promises %v but a majority of nodes hold less", promised)
	time.Sleep(1200 * time.Millisecond)
	other := rc.client(t, nil, nil, WithMaxTTL(20*time.Second))
	l2, err := other.TryLock(ctx, key, time.Second)
	select {
	case <-l.Done():
		t.Fatal("the lease ended early")
	default:
	}
	require.ErrorIs(t, err, ErrNotObtained, "another client took the lock while the lease was open: %v", l2)
}

// 7. A panic in Do's fn, recovered by the caller, must stop the renewal,
// release the lock and free this Client's line for the key.
func TestRegressionPanicInDoReleases(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c := rc.client(t, nil, nil)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		_ = c.Do(ctx, key, 10*time.Second, func(context.Context, *Lease) error { panic("boom") })
	}()
	// Release returns once a majority deleted the key; the calls to the
	// other nodes finish in the background (CI saw node 0 still holding it
	// right after Do). The ttl is 10 s, so only the release can empty them
	// within 2 s.
	for i := range 5 {
		require.Eventually(t, func() bool { return rc.value(t, i, key) == "" }, 2*time.Second, 10*time.Millisecond,
			"node %d still holds the key after the panic", i)
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Lock(lctx, key, time.Second)
	require.NoError(t, err, "the Client's line for the key stayed blocked")
	require.Less(t, time.Since(start), time.Second)
	require.NoError(t, l.Release(ctx))
}

// gatekeeperOf is the node the removed gatekeeper scheme asked first for
// key: where a busy or frozen node hurt most.
func gatekeeperOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// keyAvoiding returns a fresh test key whose former gatekeeper node is not
// one of busy, so that a test of another item does not trip over that
// scheme on the code from before it was removed.
func keyAvoiding(t *testing.T, busy ...int) string {
	t.Helper()
	for {
		k := testenv.Key(t)
		if !slices.Contains(busy, gatekeeperOf(k, 5)) {
			return k
		}
	}
}

// contend makes c retry a Lock on key once, as under contention, and
// returns once every node of rc is free of key again: the two Releases
// return at a majority, and the rest of their deletes land just after.
func contend(t *testing.T, rc *realCluster, c *Client, key string) {
	t.Helper()
	ctx := context.Background()
	other, err := c.TryLock(ctx, key, 300*time.Millisecond)
	require.NoError(t, err)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = other.Release(ctx)
	}()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, key, 300*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool {
		for i := range rc.raw {
			if rc.value(t, i, key) != "" {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "the key is still held on a node after both Releases")
}

// 8. With two busy nodes, one of them the key's former gatekeeper, three
// are free: every kind of attempt must win.
func TestRegressionBusyNodesDoNotRefuseAWinnableAttempt(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	// A node timeout a loaded machine meets (5% of contend's 300 ms ttl
	// would be 15 ms): the test is about refusals, not timeouts.
	c := rc.client(t, nil, nil, WithNodeTimeout(200*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	contend(t, rc, c, key)
	g := gatekeeperOf(key, 5)
	rc.hold(t, key, 5*time.Second, g, (g+1)%5)

	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err, "TryLock refused with 3 of 5 nodes free")
	require.NoError(t, l.Release(ctx))
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	l, err = c.Lock(lctx, key, time.Second)
	require.NoError(t, err, "Lock refused with 3 of 5 nodes free")
	require.NoError(t, l.Release(ctx))
}

// 9. A frozen node (SIGSTOP) must not hold up an attempt beyond the node
// timeout, with default go-redis clients that ignore ctx on the socket.
func TestRegressionFrozenNodeBoundsEveryAttempt(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c := rc.client(t, nil, nil, WithNodeTimeout(50*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	contend(t, rc, c, key)
	g := gatekeeperOf(key, 5)
	require.NoError(t, rc.nodes[g].Pause())
	t.Cleanup(func() { _ = rc.nodes[g].Resume() })
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Lock(lctx, key, time.Second)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, time.Second, "an attempt waited %v for a frozen node", took)
	require.NoError(t, l.Release(ctx))
}

// 10. With WithRetry(_, 1), a second Lock from the same Client on a held
// key must fail after its one attempt, as another Client's does.
func TestRegressionRetryLimitAppliesToTheLocalLine(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c := rc.client(t, nil, nil, WithRetry(DefaultRetry, 1))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(lctx, key, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, lctx.Err(), "the second Lock waited until its ctx ended")
	require.Less(t, time.Since(start), time.Second)
	require.NoError(t, l.Release(ctx))
}

// 11. A failed attempt whose call to a node was cancelled after the node
// had received it (outcome unknown) must not leave the key there: the
// cleanup's release may reach the node before the acquire does.
func TestRegressionFailedAttemptLeavesNoKeyWhereTheOutcomeWasUnknown(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	released, landed := make(chan struct{}), make(chan struct{})
	var relOnce, landOnce sync.Once
	late := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 4 {
			return sc
		}
		return hookScripter{Scripter: sc,
			before: func(ctx context.Context, script string, keys []string, args []any) *redis.Cmd {
				if script != "acquire" || !isTestKey(keys[0]) {
					return nil
				}
				// The request is on the wire: the client gives up on it,
				// and it reaches the node only after the cleanup's release.
				<-ctx.Done()
				go func() {
					<-released
					_ = acquireScript.Run(context.Background(), sc, keys, args...).Err()
					landOnce.Do(func() { close(landed) })
				}()
				return redis.NewCmdResult(nil, ctx.Err())
			},
			after: func(_ context.Context, script string, keys []string, _ []any, _ *redis.Cmd) {
				if script == "release" && isTestKey(keys[0]) {
					relOnce.Do(func() { close(released) })
				}
			}}
	}
	c := rc.client(t, late, nil, WithNodeTimeout(300*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	rc.hold(t, key, 10*time.Second, 1, 2, 3)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained, "%v", l)
	select {
	case <-landed:
	case <-time.After(5 * time.Second):
		t.Fatal("the late acquire never reached node 4")
	}
	require.Empty(t, rc.value(t, 4, key), "the late acquire kept the key on node 4 after the attempt was given up")
}

// 11, second half: a node whose reply was an error (here a connection
// reset after the request went out) did not settle anything: the request
// may still run there, so the failed attempt's cleanup must release it
// too, as it does a node that did not answer at all.
func TestRegressionFailedAttemptCleansUpANodeThatAnsweredWithAnError(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	released, landed := make(chan struct{}), make(chan struct{})
	var relOnce, landOnce sync.Once
	hooks := func(i int, sc redis.Scripter) redis.Scripter {
		switch i {
		case 3: // answers late, so that node 4's error is counted first
			return hookScripter{Scripter: sc,
				before: func(ctx context.Context, script string, keys []string, _ []any) *redis.Cmd {
					if script == "acquire" && isTestKey(keys[0]) {
						time.Sleep(50 * time.Millisecond)
					}
					return nil
				}}
		case 4:
			return hookScripter{Scripter: sc,
				before: func(ctx context.Context, script string, keys []string, args []any) *redis.Cmd {
					if script != "acquire" || !isTestKey(keys[0]) {
						return nil
					}
					go func() {
						select {
						case <-released:
						case <-time.After(500 * time.Millisecond):
						}
						_ = acquireScript.Run(context.Background(), sc, keys, args...).Err()
						landOnce.Do(func() { close(landed) })
					}()
					return redis.NewCmdResult(nil, errors.New("read tcp: connection reset by peer"))
				},
				after: func(_ context.Context, script string, keys []string, _ []any, _ *redis.Cmd) {
					if script == "release" && isTestKey(keys[0]) {
						relOnce.Do(func() { close(released) })
					}
				}}
		}
		return sc
	}
	c := rc.client(t, hooks, nil, WithNodeTimeout(300*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	rc.hold(t, key, 10*time.Second, 1, 2, 3)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained, "%v", l)
	require.ErrorContains(t, err, "connection reset", "node 4's error was not among the attempt's replies: the test proves nothing")
	select {
	case <-landed:
	case <-time.After(5 * time.Second):
		t.Fatal("the late acquire never reached node 4")
	}
	require.Empty(t, rc.value(t, 4, key), "a node that answered with an error kept the key after the attempt was given up")
}

func isTestKey(k string) bool { return len(k) > 7 && k[:7] == "qltest:" }

// 12. A Lock waiting in this Client's line when Close is called must not
// get a lease afterwards (it could be neither renewed nor looked after).
func TestRegressionLockWaitingAtCloseGetsNoLease(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c := rc.client(t, nil, nil)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	l1, err := c.Lock(ctx, key, 500*time.Millisecond)
	require.NoError(t, err)
	type res struct {
		l   *Lease
		err error
	}
	waiting := make(chan res, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := c.Lock(lctx, key, 500*time.Millisecond)
		waiting <- res{l, err}
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Close())
	// The key goes away on the nodes (an operator, or its expiry): when the
	// first lease's deadline passes, nothing would stop a waiter's attempt.
	rc.drop(t, key, 0, 1, 2, 3, 4)
	select {
	case r := <-waiting:
		require.Nil(t, r.l, "a Lock got a lease from a closed Client")
		require.ErrorIs(t, r.err, ErrClosed)
	case <-time.After(3 * time.Second):
		t.Fatal("Lock kept waiting after Close")
	}
	time.Sleep(time.Until(l1.Deadline()) + 100*time.Millisecond)
	for i := range 5 {
		require.Empty(t, rc.value(t, i, key), "node %d holds the key after the Client closed", i)
	}
}

// 12, second half: a lease outlives its Client's Close. Its Release still
// deletes the key on every node and says so (Close has closed the Client's
// goroutine pool, so the release round runs on goroutines of its own),
// and leaves nothing running (goleak, in TestMain).
func TestRegressionReleaseAfterCloseDeletesEverywhere(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c, err := New(testenv.Clients(t, rc.nodes))
	require.NoError(t, err)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	// the extend round, through the pool before Close and after it
	require.NoError(t, l.Extend(ctx, 5*time.Second))
	require.NoError(t, c.Close())
	done := make(chan error, 2)
	go func() {
		done <- l.Extend(ctx, 5*time.Second)
		done <- l.Release(ctx)
	}()
	for _, what := range []string{"an Extend", "the Release"} {
		select {
		case err := <-done:
			require.NoError(t, err, "%s after Close", what)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s after Close did not return", what)
		}
	}
	for i := range 5 {
		require.Empty(t, rc.value(t, i, key), "node %d kept the key after a Release that followed Close", i)
	}
}

// 13. Once a majority granted, the calls to the other nodes must still go
// out: every reachable node gets the key, so a held lock survives as many
// node failures as it can.
func TestRegressionEveryReachableNodeGetsTheKey(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	slowStart := func(i int, sc redis.Scripter) redis.Scripter {
		if i < 3 {
			return sc
		}
		// Nodes 3 and 4 are reached a little later than the others, as
		// when their goroutines are scheduled late or a connection is being
		// dialled: the decision is made before their calls are sent.
		return hookScripter{Scripter: sc, before: func(ctx context.Context, script string, _ []string, _ []any) *redis.Cmd {
			if script == "acquire" {
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		}}
	}
	c := rc.client(t, slowStart, nil, WithFencing())
	require.NoError(t, c.Bootstrap(ctx))
	for range 5 {
		key := testenv.Key(t)
		l, err := c.TryLock(ctx, key, 5*time.Second)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			for i := range 5 {
				if rc.value(t, i, key) != l.value {
					return false
				}
			}
			return true
		}, time.Second, 5*time.Millisecond, "the lock lives on fewer than all five nodes")
		require.NoError(t, l.Release(ctx))
	}
}

// Nodes must be independent primaries: a replica is refused with a clear
// error, not accepted as a vote that can never grant.
func TestRegressionReplicaIsRefused(t *testing.T) {
	primary := testenv.Redis(t)
	replica := testenv.Redis(t, testenv.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	other := testenv.RedisNodes(t, 1)[0]
	ucs := []redis.UniversalClient{primary.Client(t), replica.Client(t), other.Client(t)}
	c, err := New(ucs)
	require.ErrorContains(t, err, "is a replica")
	require.ErrorContains(t, err, "independent primaries")
	require.Nil(t, c)
}

// A caller's key can never be one of quorumlock's: locking the key that
// used to be K's fence, then K with fencing, works; a key in the reserved
// namespace is refused before any node is contacted.
func TestRegressionUserKeysCannotCollideWithInternalKeys(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	c := rc.client(t, nil, nil, WithFencing())
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	squat, err := c.TryLock(ctx, key+":quorumlock:fence", time.Second)
	require.NoError(t, err)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err, "a caller's key broke fenced locking of another key")
	require.Positive(t, l.FencingToken())
	require.NoError(t, l.Release(ctx))
	require.NoError(t, squat.Release(ctx))
	_, err = c.TryLock(ctx, script.FenceKey(key), time.Second)
	require.ErrorContains(t, err, "own namespace")
}

// A client with other settings cannot take over a deployment whose
// majority lost its data while one node still carries the deployment's
// settings: it is refused, the wiped nodes are never admitted under its
// settings, and the deployment's own clients re-admit them after one
// quarantine.
func TestRegressionOtherSettingsCannotTakeOverAWipedMajority(t *testing.T) {
	rc := newRealCluster(t, 5)
	const maxTTL, short = 1500 * time.Millisecond, 200 * time.Millisecond
	ctx := context.Background()
	a := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	require.NoError(t, a.Bootstrap(ctx))
	for _, i := range []int{0, 1, 2, 3} {
		rc.restartEmpty(t, i)
	}
	b := rc.client(t, nil, nil, WithMaxTTL(short))
	for end := time.Now().Add(4 * short); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		l, err := b.TryLock(ctx, "k", short)
		require.Nil(t, l, "a client with other settings got a lease")
		if err != nil && !errors.Is(err, ErrConfigMismatch) && !errors.Is(err, ErrNotObtained) {
			t.Fatalf("unexpected error class: %v", err)
		}
	}
	require.Eventually(t, func() bool { // B's background admissions give up too
		for i := range 4 {
			if v := rc.value(t, i, script.MarkerKey); v != "" && v != a.settings {
				t.Fatalf("node %d admitted under %q", i, v)
			}
		}
		return true
	}, time.Second, 50*time.Millisecond)
	_, err := b.TryLock(ctx, "k", short)
	require.ErrorIs(t, err, ErrConfigMismatch, "node 4 still carries the deployment's settings")

	lctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	l, err := a.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "the deployment's own clients could not re-admit the wiped nodes")
	require.NoError(t, l.Release(ctx))
}

// Found by the nemesis: a client with other settings than the deployment's
// (refused with a ConfigError on the admitted nodes) started the
// quarantine of nodes that restarted empty under its own settings, and
// the deployment's own clients that had no admitted node in sight were
// then refused on those nodes ("is being admitted with ...") until the
// marks expired. A client that has met a node admitted under other
// settings starts no quarantine.
func TestRegressionMisconfiguredClientStartsNoQuarantine(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	a := rc.client(t, nil, nil, WithMaxTTL(maxTTL), WithNodeTimeout(200*time.Millisecond))
	require.NoError(t, a.Bootstrap(ctx))
	b := rc.client(t, nil, nil, WithMaxTTL(2*maxTTL), WithNodeTimeout(200*time.Millisecond))
	_, err := b.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		rc.restartEmpty(t, i)
	}
	_, err = b.TryLock(ctx, "k", maxTTL)
	require.Error(t, err)
	time.Sleep(100 * time.Millisecond) // background admissions, if any, write their marks
	for i := range 5 {
		sett, err := rc.raw[i].HGet(ctx, script.PendingKey, "settings").Result()
		if err == nil {
			require.NotEqual(t, b.settings, sett, "node %d: the misconfigured client started its quarantine", i)
		}
	}
	fresh := rc.client(t, nil, nil, WithMaxTTL(maxTTL), WithNodeTimeout(200*time.Millisecond))
	_, err = fresh.TryLock(ctx, "k", maxTTL)
	require.NotErrorIs(t, err, ErrConfigMismatch, "a client with the deployment's settings was refused")
	require.Eventually(t, func() bool {
		l, err := fresh.TryLock(ctx, "k", maxTTL)
		if err != nil {
			require.NotErrorIs(t, err, ErrConfigMismatch)
			return false
		}
		require.NoError(t, l.Release(ctx))
		return true
	}, 5*time.Second, 50*time.Millisecond, "the deployment's client never got the lock after the quarantine")
}

// The conflict that stops a client from starting quarantines is not for
// good: once the deployment is bootstrapped again with the client's
// settings, the client starts the quarantine of a node that restarted
// empty, as any client of the deployment does.
func TestRegressionConflictEndsWhenTheDeploymentMatches(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	opt := WithNodeTimeout(200 * time.Millisecond)
	a := rc.client(t, nil, nil, WithMaxTTL(maxTTL), opt)
	require.NoError(t, a.Bootstrap(ctx))
	b := rc.client(t, nil, nil, WithMaxTTL(2*maxTTL), opt)
	_, err := b.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		rc.restartEmpty(t, i)
	}
	fresh := rc.client(t, nil, nil, WithMaxTTL(2*maxTTL), opt)
	require.NoError(t, fresh.Bootstrap(ctx)) // the operator moves the deployment to b's settings
	l, err := b.TryLock(ctx, "k", maxTTL)
	require.NoError(t, err, "b still refuses after the deployment took its settings")
	require.NoError(t, l.Release(ctx))
	rc.requireStartsQuarantine(t, b, "b started no quarantine on the restarted node")
}

// The residual case (docs/fencing.md): when every node loses its data
// while a lease is trusted, a client with a shorter max TTL that comes
// first decides the deployment's settings and can be granted the lock
// before the old lease ends. No node keeps anything to refuse it with.
// What still holds is fencing: the time floor gives the new holder a
// larger token than the old one, so a fenced resource refuses the old
// holder's late writes. If the first check fails, the residual case has
// been closed: update docs/fencing.md and turn this test around.
func TestResidualCaseFullWipeKeepsTokensIncreasing(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL, short = 3 * time.Second, 300 * time.Millisecond
	a := rc.client(t, nil, nil, WithMaxTTL(maxTTL), WithFencing(), WithNodeTimeout(200*time.Millisecond))
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
		wg.Go(func() { errs[i] = errors.Join(rc.nodes[i].Kill(), rc.nodes[i].Restart(ctx)) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	b := rc.client(t, nil, nil, WithMaxTTL(short), WithFencing(), WithNodeTimeout(200*time.Millisecond))
	lctx, cancel := context.WithTimeout(ctx, maxTTL/2)
	defer cancel()
	lb, err := b.Lock(lctx, "k", short)
	require.NoError(t, err, "the residual case no longer grants: docs/fencing.md describes it as open")
	require.True(t, time.Now().Before(la.Deadline()), "A's lease ended before B was granted: the test did not reach the overlap")
	require.Greater(t, lb.FencingToken(), la.FencingToken(),
		"after a full wipe the new holder's token must still be above the old holder's")
	require.NoError(t, lb.Release(ctx))
}

// A client that met a node admitted under other settings keeps starting no
// quarantine after every node is wiped: with nothing left on the nodes it
// cannot tell its settings from the deployment's, so it waits (and its
// ConfigError names the settings it last saw). It is not stuck for good:
// once a client that has met no conflict re-admits the nodes under the
// same settings, the first node that answers admitted ends the conflict,
// without a Bootstrap.
func TestRegressionConflictEndsWhenAPeerReadmitsUnderItsSettings(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	opt := WithNodeTimeout(200 * time.Millisecond)
	other := rc.client(t, nil, nil, WithMaxTTL(2*maxTTL), opt)
	require.NoError(t, other.Bootstrap(ctx))
	a := rc.client(t, nil, nil, WithMaxTTL(maxTTL), opt)
	_, err := a.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		rc.restartEmpty(t, i)
	}
	_, err = a.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch, "after a full wipe the conflicted client must still wait")
	for i := range 5 {
		_, err := rc.raw[i].HGet(ctx, script.PendingKey, "settings").Result()
		require.ErrorIs(t, err, redis.Nil, "node %d: the conflicted client started a quarantine", i)
	}
	peer := rc.client(t, nil, nil, WithMaxTTL(maxTTL), opt)
	lctx, cancel := context.WithTimeout(ctx, 20*maxTTL)
	defer cancel()
	l, err := peer.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "a client without a conflict could not admit the wiped nodes")
	require.NoError(t, l.Release(ctx))
	l, err = a.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "a was not granted on nodes admitted under its settings")
	require.NoError(t, l.Release(ctx))
	rc.requireStartsQuarantine(t, a, "the conflict did not end: a started no quarantine on the restarted node")
}

// requireStartsQuarantine restarts node 0 empty and requires that c, on
// its next attempt, starts the node's quarantine under its own settings
// (or has already admitted it).
func (rc *realCluster) requireStartsQuarantine(t *testing.T, c *Client, msg string) {
	t.Helper()
	ctx := context.Background()
	rc.restartEmpty(t, 0)
	_, _ = c.TryLock(ctx, "k", c.cfg.maxTTL) // finds node 0 without its marker
	require.Eventually(t, func() bool {
		sett, err := rc.raw[0].HGet(ctx, script.PendingKey, "settings").Result()
		return err == nil && sett == c.settings || rc.admittedOn(t, 0)
	}, 3*time.Second, 20*time.Millisecond, msg)
}
