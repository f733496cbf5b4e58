package redlock

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// How a round copes with its nodes: frozen, failing, slow, restarted
// with an empty script cache.

// A frozen minority (SIGSTOP) holds up neither TryLock nor Release, even
// with a node timeout far above what the round takes: both return at a
// majority. The clients are at go-redis defaults (3s read timeout, ctx
// deadlines not applied to the socket): waiting for a frozen node would
// take seconds.
func TestNodes_AFrozenMinorityDoesNotDelay(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(2*time.Second))
	ctx := context.Background()
	cl.freeze(t, 3, 4)
	key := testenv.Key(t)
	for range 5 {
		start := time.Now()
		l, err := c.TryLock(ctx, key, 10*time.Second)
		took := time.Since(start)
		require.NoError(t, err)
		require.Less(t, took, time.Second, "TryLock waited for the frozen nodes")
		start = time.Now()
		require.NoError(t, l.Release(ctx))
		require.Less(t, time.Since(start), time.Second, "Release waited for the frozen nodes")
		require.Equal(t, []string{"", "", ""}, cl.values(t, []int{0, 1, 2}, key))
	}
}

// A frozen majority fails an attempt within about the node timeout, with
// every cause, and leaves nothing behind on the nodes that answered; Lock
// gives up when its ctx does.
func TestNodes_AFrozenMajorityFailsFast(t *testing.T) {
	cl := newCluster(t, 5)
	const nodeTimeout = 200 * time.Millisecond
	c, _ := cl.ready(t, WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	cl.freeze(t, 2, 3, 4)
	key := testenv.Key(t)
	start := time.Now()
	_, err := c.TryLock(ctx, key, 10*time.Second)
	took := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	require.Less(t, took, 2*nodeTimeout, "TryLock took %v, want within twice the node timeout", took)
	// Nothing left behind on the nodes that answered.
	cl.requireGoneOn(t, key, 0, 1)

	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.Lock(lctx, key, 10*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	cl.thaw(t, 2, 3, 4)
}

func TestNodes_ErrorsAreReportedPerNode(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	boom := errors.New("connection refused")
	f.fail(boom, "", 0, 1, 2)
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second)
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

// Nodes that answer after the ttl is used up grant nothing: the attempt
// fails, and the keys the late round set are released, not left to
// expire.
func TestNodes_SlowNodesUseUpTheValidity(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithNodeTimeout(time.Second))
	ctx := context.Background()
	key := testenv.Key(t)
	f.delay(60*time.Millisecond, "")
	_, err := c.TryLock(ctx, key, 50*time.Millisecond)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "validity used up")
	f.heal()
	cl.requireGone(t, key, "the late round's keys were left to expire")
}

// A node that missed its last deadline is not waited for by an attempt
// that can only succeed if it answers: the attempt gives up at once.
// Nodes 3 and 4 stall here (calls held until their ctx ends).
func TestNodes_AnAttemptDoesNotWaitForNodesThatMissedTheirDeadline(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	thaw := f.hold("", 3, 4)
	cl.set(t, key, "other", time.Minute, 0)

	start := time.Now()
	_, err := c.TryLock(ctx, key, 10*time.Second)
	first := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.GreaterOrEqual(t, first, 300*time.Millisecond, "the first attempt cannot know the stalled nodes are gone")

	start = time.Now()
	_, err = c.TryLock(ctx, key, 10*time.Second)
	second := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorContains(t, err, "missed its previous deadline")
	require.Less(t, second, 150*time.Millisecond, "the second attempt waited for nodes that had missed their deadline")

	// Once they answer again they count as before.
	thaw()
	f.heal()
	cl.drop(t, key, 0)
	require.Eventually(t, func() bool {
		l, err := c.TryLock(ctx, testenv.Key(t), 10*time.Second)
		if err != nil {
			return false
		}
		_ = l.Release(ctx)
		return !missedLast(c, 3) && !missedLast(c, 4)
	}, 3*time.Second, 20*time.Millisecond)
}

// From a review: a frozen node (SIGSTOP) must not hold up an attempt beyond the node
// timeout, with default go-redis clients that ignore ctx on the socket.
func TestNodes_AFrozenNodeBoundsEveryAttempt(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	c, f := cl.faulty(t, WithNodeTimeout(50*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	cl.contend(t, c, f, key)
	cl.freeze(t, 0)
	// A call that waited for the frozen node would end at go-redis's read
	// timeout, 3 s; the bound leaves room for a loaded machine (1.01 s was
	// seen at a load of 9).
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Lock(lctx, key, time.Second)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, 2500*time.Millisecond, "an attempt waited %v for a frozen node", took)
	require.NoError(t, l.Release(ctx))
}

// From a review: once a majority granted, the calls to the other nodes must still go
// out: every reachable node gets the key, so a held lock survives as many
// node failures as it can.
func TestNodes_EveryReachableNodeGetsTheKey(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	c, f := cl.faulty(t, WithFencing())
	// Nodes 3 and 4 are reached a little later than the others, as when
	// their goroutines are scheduled late or a connection is being
	// dialled: the decision is made before their calls are sent.
	f.delay(20*time.Millisecond, "acquire", 3, 4)
	require.NoError(t, c.Bootstrap(ctx))
	for range 5 {
		key := testenv.Key(t)
		l, err := c.TryLock(ctx, key, 5*time.Second)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			for i := range 5 {
				if cl.value(t, i, key) != valueOf(l) {
					return false
				}
			}
			return true
		}, time.Second, 5*time.Millisecond, "the lock lives on fewer than all five nodes")
		require.NoError(t, l.Release(ctx))
	}
}

// Scripts go out as EVALSHA with prebuilt arguments; a node whose script
// cache was emptied (a restart, SCRIPT FLUSH) answers NOSCRIPT and gets the
// source instead.
func TestNodes_AFlushedScriptCacheIsRefilled(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing())
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	for _, rc := range cl.raw {
		require.NoError(t, rc.ScriptFlush(ctx).Err())
	}
	require.NoError(t, l.Extend(ctx, 2*time.Second))
	require.NoError(t, l.Release(ctx))
	for _, rc := range cl.raw {
		require.NoError(t, rc.ScriptFlush(ctx).Err())
	}
	l, err = c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.Positive(t, l.FencingToken())
	require.NoError(t, l.Release(ctx))
}

// The per-node cause of a node that refuses connections names the
// transport error, on the attempt that timed out and on the next one,
// which does not wait for it. go-redis dials in the background and hands
// the call only its ctx's deadline. From a newcomer's review: the causes
// said "context deadline exceeded" and "not waited for".
func TestNodes_CausesNameTheTransportError(t *testing.T) {
	cl := newCluster(t, 2)
	nodes := cl.universal()
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody listens on once closed
		require.NoError(t, err)
		dead := l.Addr().String()
		require.NoError(t, l.Close())
		rc := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	c, err := New(nodes, WithProbeTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for attempt := range 2 {
		_, err := c.TryLock(context.Background(), testenv.Key(t), time.Second)
		require.ErrorIs(t, err, ErrNotObtained)
		named := map[int]bool{}
		for _, e := range flatten(err) {
			var ne *NodeError
			var oe *net.OpError
			if errors.As(e, &ne) && ne.Node >= 2 && errors.As(ne, &oe) && strings.Contains(ne.Error(), "connection refused") {
				named[ne.Node] = true
			}
		}
		require.Equal(t, map[int]bool{2: true, 3: true, 4: true}, named, "attempt %d: %v", attempt, err)
	}
}
